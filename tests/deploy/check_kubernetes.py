#!/usr/bin/env python3
"""Offline checks of deploy/kubernetes: renders every kustomization and
asserts what the sidecar must look like once rendered.

Usage: check_kubernetes.py --kustomize CMD [--breakerd PATH]
                           [--breakerctl PATH] [--repo DIR]
       check_kubernetes.py --dockerfile-only [--breakerd PATH]
                           [--breakerctl PATH]

--kustomize is the render command, with the directory appended: for example
"kubectl kustomize" or "/path/to/kustomize build". --breakerd, when given,
checks every rendered breakerd config with `breakerd --check-config` (the
CI check the README recommends), reads its --trace-max-bytes default, and
maps its shared libraries to the runtime image's packages; --breakerctl
adds breakerctl's libraries to that mapping.
Run through tests/deploy/check_kubernetes.sh, which finds or installs the
tools. Exits 1 on any failure and prints every failure, not just the first.
"""

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

import yaml

FAILURES = []

# breakerd's --trace-max-bytes default (server/main.cc), used unless the
# real binary is given (then read from its --help).
TRACE_MAX_BYTES_DEFAULT = 8 << 20
# Room the state file and the last good config need beside a trace on the
# state emptyDir: one line per breaker that is not closed (about 2 MiB at
# 10,000) plus a config file.
STATE_DIR_HEADROOM = 4 << 20


def check(cond, what):
    if cond:
        print(f"  ok   {what}")
    else:
        print(f"  FAIL {what}")
        FAILURES.append(what)
    return cond


def render(kustomize, path):
    cmd = shlex.split(kustomize) + [path]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        check(False, f"render {path}: {' '.join(cmd)} failed:\n"
              f"{proc.stderr.strip()}")
        return []
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    check(bool(docs), f"render {path}: {len(docs)} objects")
    return docs


def find(docs, kind, name=None):
    return [d for d in docs if d.get("kind") == kind and
            (name is None or d["metadata"]["name"] == name)]


def one(docs, kind, name=None):
    found = find(docs, kind, name)
    check(len(found) == 1, f"exactly one {kind}{' ' + name if name else ''} "
          f"(found {len(found)})")
    return found[0] if found else None


def parse_flags(args):
    flags = {}
    for arg in args or []:
        if arg.startswith("--") and "=" in arg:
            key, value = arg[2:].split("=", 1)
            flags[key] = value
    return flags


def parse_quantity(text):
    """A Kubernetes quantity of bytes ("16Mi", "8M", "1024") as an int."""
    if text is None:
        return None
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
             "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    text = str(text)
    for unit, factor in units.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(float(text))


def mount_of(path, mounts):
    """The volumeMount whose mountPath holds `path` (longest match)."""
    best = None
    for m in mounts:
        root = m["mountPath"].rstrip("/") + "/"
        if path.startswith(root) and (
                best is None or len(root) > len(best["mountPath"])):
            best = m
    return best


def parse_seconds(text):
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for unit in ("ms", "s", "m", "h"):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * units[unit]
    raise ValueError(text)


def check_probe(container, kind, path):
    probe = container.get(kind)
    if not check(probe is not None, f"{kind} set"):
        return
    get = probe.get("httpGet", {})
    check(get.get("path") == path, f"{kind} httpGet path {path} "
          f"(is {get.get('path')})")
    port = get.get("port")
    check(isinstance(port, int) and port == 9464,
          f"{kind} port is the number 9464 (is {port!r})")


def check_sidecar(docs, label, native):
    """The Deployment's breakerd container, native or legacy flavour."""
    print(f"[{label}] sidecar")
    deployment = one(docs, "Deployment")
    if deployment is None:
        return None
    pod = deployment["spec"]["template"]
    spec = pod["spec"]
    inits = [c for c in spec.get("initContainers", []) if c["name"] == "breakerd"]
    mains = [c for c in spec.get("containers", []) if c["name"] == "breakerd"]
    if native:
        check(len(inits) == 1 and not mains,
              "breakerd is in initContainers (native sidecar), not containers")
        c = inits[0] if inits else None
        if c is None:
            return None
        check(c.get("restartPolicy") == "Always",
              "native sidecar has restartPolicy: Always")
        check(any(x["name"] != "breakerd" for x in spec.get("containers", [])),
              "the app container is still there")
    else:
        check(len(mains) == 1 and not inits,
              "breakerd is in containers (legacy), not initContainers")
        c = mains[0] if mains else None
        if c is None:
            return None
        check("restartPolicy" not in c,
              "legacy container has no restartPolicy (invalid there)")
        cmd = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get(
            "command", [])
        check(len(cmd) >= 2 and cmd[0] == "/bin/sleep",
              f"legacy container delays its SIGTERM with a preStop sleep ({cmd})")

    image = c.get("image", "")
    check(image and image != "breakerd" and ":" in image,
          f"image set by the images: transformer ({image})")

    flags = parse_flags(c.get("args"))
    check(flags.get("listen") == "127.0.0.1:50051",
          f"gRPC on loopback only (--listen={flags.get('listen')})")
    check(flags.get("metrics-listen") == "0.0.0.0:9464",
          f"metrics on the pod IP (--metrics-listen={flags.get('metrics-listen')})")
    check(flags.get("config", "").startswith("/etc/breakerd/"),
          f"--config under the ConfigMap mount ({flags.get('config')})")
    check(flags.get("admin-token-file", "").startswith("/var/run/secrets/breakerd/"),
          f"--admin-token-file under the Secret mount "
          f"({flags.get('admin-token-file')})")

    ports = {p.get("name"): p for p in c.get("ports", [])}
    check("metrics" in ports and ports["metrics"].get("containerPort") == 9464,
          "port `metrics` is containerPort 9464")

    check_probe(c, "startupProbe", "/healthz")
    check_probe(c, "livenessProbe", "/healthz")
    check_probe(c, "readinessProbe", "/readyz")

    sc = c.get("securityContext", {})
    check(sc.get("runAsNonRoot") is True, "securityContext.runAsNonRoot true")
    check(sc.get("runAsUser") == 65532, "securityContext.runAsUser 65532")
    check(sc.get("readOnlyRootFilesystem") is True,
          "securityContext.readOnlyRootFilesystem true")
    check(sc.get("allowPrivilegeEscalation") is False,
          "securityContext.allowPrivilegeEscalation false")
    check(sc.get("capabilities", {}).get("drop") == ["ALL"],
          "securityContext.capabilities.drop [ALL]")
    check(not sc.get("capabilities", {}).get("add"), "no capabilities added")
    check(sc.get("seccompProfile", {}).get("type") == "RuntimeDefault",
          "securityContext.seccompProfile RuntimeDefault")

    res = c.get("resources", {})
    for section in ("requests", "limits"):
        for key in ("cpu", "memory"):
            check(key in res.get(section, {}), f"resources.{section}.{key} set")

    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    mounts = c.get("volumeMounts", [])
    config_dir = os.path.dirname(flags.get("config", "/nonexistent/x"))
    cm_mounts = [m for m in mounts
                 if "configMap" in volumes.get(m["name"], {})]
    check(len(cm_mounts) == 1, "one ConfigMap volume mounted")
    for m in cm_mounts:
        check("subPath" not in m and "subPathExpr" not in m,
              "ConfigMap mounted as a directory, no subPath (updates propagate)")
        check(m["mountPath"] == config_dir,
              f"--config file lies in the ConfigMap mount ({m['mountPath']})")
        check(m.get("readOnly") is True, "ConfigMap mount read-only")
        cm_name = volumes[m["name"]]["configMap"]["name"]
        cm = one(docs, "ConfigMap", cm_name)
        if cm is not None:
            key = os.path.basename(flags.get("config", ""))
            check(key in cm.get("data", {}),
                  f"ConfigMap {cm_name} has the key {key}")
            # breakerd-config, or <app>-breakerd-config with
            # components/breakerd-per-app; never a hash suffix.
            check(cm_name.endswith("breakerd-config"),
                  f"ConfigMap name {cm_name} has no hash suffix (reloads "
                  f"in place)")
    state_dir = os.path.dirname(flags.get("state-file", "/nonexistent/x"))
    state_mounts = [m for m in mounts
                    if "emptyDir" in volumes.get(m["name"], {})
                    and m["mountPath"] == state_dir]
    check(len(state_mounts) == 1 and not state_mounts[0].get("readOnly"),
          f"--state-file ({flags.get('state-file')}) lies on a writable "
          f"emptyDir mount (survives container restarts)")
    # A --trace-file grows to --trace-max-bytes. On an emptyDir, past its
    # sizeLimit the kubelet evicts the pod; the state emptyDir also holds
    # the state file and the last good config. Checked whether or not the
    # trace is on, so that turning it on with the defaults is safe.
    trace_bound = int(flags.get("trace-max-bytes", TRACE_MAX_BYTES_DEFAULT))
    trace_file = flags.get("trace-file")
    trace_mount = (mount_of(trace_file, mounts) if trace_file
                   else (state_mounts[0] if state_mounts else None))
    if trace_file:
        check(trace_mount is not None
              and "emptyDir" in volumes.get(trace_mount["name"], {})
              and not trace_mount.get("readOnly"),
              f"--trace-file ({trace_file}) lies on a writable emptyDir "
              f"mount (the root filesystem is read-only)")
    if trace_mount is not None and "emptyDir" in volumes.get(
            trace_mount["name"], {}):
        limit = parse_quantity(
            volumes[trace_mount["name"]]["emptyDir"].get("sizeLimit"))
        shared = trace_mount["mountPath"] == state_dir
        need = trace_bound + (STATE_DIR_HEADROOM if shared else 0)
        check(limit is not None and need <= limit,
              f"emptyDir {trace_mount['name']} sizeLimit "
              f"({limit} bytes) holds a trace of --trace-max-bytes "
              f"({trace_bound}){' plus the state and config files' if shared else ''}"
              f" ({need} bytes): no eviction")
    secret_mounts = [m for m in mounts
                     if "secret" in volumes.get(m["name"], {})]
    check(len(secret_mounts) == 1, "one Secret volume mounted")
    for m in secret_mounts:
        vol = volumes[m["name"]]["secret"]
        check(vol.get("optional") is not True, "token Secret is required")
        # 0400, made 0440 group fsGroup by the kubelet: readable by
        # breakerd's group only (never 0644, the default).
        check(vol.get("defaultMode") == 0o400,
              f"token Secret defaultMode 0400 (got "
              f"{oct(vol['defaultMode']) if 'defaultMode' in vol else 'unset: 0644'})")
        pod_sc = spec.get("securityContext", {})
        check(pod_sc.get("fsGroup") is not None
              and pod_sc.get("fsGroup") == sc.get("runAsGroup"),
              f"pod fsGroup ({pod_sc.get('fsGroup')}) is breakerd's "
              f"runAsGroup ({sc.get('runAsGroup')}), so the 0400 token "
              f"Secret is readable by breakerd")
        items = {i["key"]: i["path"] for i in vol.get("items", [])}
        token_file = os.path.basename(flags.get("admin-token-file", ""))
        check(items.get("token") == token_file,
              f"Secret key `token` is the file --admin-token-file reads")
        check(m["mountPath"] == os.path.dirname(
            flags.get("admin-token-file", "")), "token file in the Secret mount")
        secret = find(docs, "Secret", vol["secretName"])
        check(len(secret) == 1 and "token" in secret[0].get("data", {}),
              f"Secret {vol['secretName']} (example) has the key token")
        check(vol["secretName"].endswith("breakerd-admin-token"),
              f"Secret name {vol['secretName']} has no hash suffix (a "
              f"rotated token reaches running pods)")

    grace = spec.get("terminationGracePeriodSeconds", 30)
    budget = parse_seconds(flags.get("shutdown-grace", "10s"))
    if not native:
        cmd = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get(
            "command", [])
        if len(cmd) >= 2:
            budget += float(cmd[1])
    check(grace >= budget + 5,
          f"terminationGracePeriodSeconds {grace} covers breakerd's shutdown "
          f"({budget:g} s) with room for the app")

    check(pod["metadata"].get("labels", {}).get("breakerd/sidecar") == "enabled",
          "pod template carries the label the PodMonitor selects")
    return c


# The variable every client reads for breakerd's address (client/README.md).
CLIENT_ADDR_ENV = "BREAKERD_ADDR"
CLIENT_SOURCES = ("client/cpp/src/client.cc", "client/go/client.go",
                  "client/python/src/breakerd/_client.py",
                  "client/java/src/main/java/io/breakerd/client/BreakerdClient.java",
                  "client/node/src/client.ts")


def check_client_address(docs, label, repo, sidecar):
    """The app containers name breakerd's address with the variable every
    client reads, and it is an address the sidecar listens on."""
    print(f"[{label}] app containers find the sidecar")
    for rel in CLIENT_SOURCES:
        with open(os.path.join(repo, rel), encoding="utf-8") as f:
            check(CLIENT_ADDR_ENV in f.read(), f"{rel} reads {CLIENT_ADDR_ENV}")
    deployment = one(docs, "Deployment")
    if deployment is None or sidecar is None:
        return
    listen = parse_flags(sidecar.get("args", [])).get("listen", "")
    addresses = set(listen.split(",")) if listen else {"127.0.0.1:50051"}
    for c in deployment["spec"]["template"]["spec"].get("containers", []):
        if c["name"] == "breakerd":
            continue
        for env in c.get("env", []):
            if "BREAKERD" in env["name"] and env["name"].endswith(
                    ("ADDR", "TARGET", "ADDRESS", "HOST")):
                check(env["name"] == CLIENT_ADDR_ENV,
                      f"container {c['name']} sets {env['name']}: the clients "
                      f"read {CLIENT_ADDR_ENV}")
                check(env.get("value") in addresses,
                      f"container {c['name']}: {env['name']}={env.get('value')} "
                      f"is an address breakerd listens on ({listen})")


def strip_flavour(container):
    c = json.loads(json.dumps(container))
    c.pop("restartPolicy", None)
    c.pop("lifecycle", None)
    return c


def check_monitoring(docs, repo, sidecar):
    print("[monitoring]")
    pm = one(docs, "PodMonitor", "breakerd")
    if pm is not None:
        check("breakerd" in pm["metadata"]["name"],
              "PodMonitor name (the job label) matches the alert rules' "
              "job=~\".*breakerd.*\"")
        check(pm["apiVersion"] == "monitoring.coreos.com/v1",
              "PodMonitor apiVersion monitoring.coreos.com/v1")
        selector = pm["spec"].get("selector", {}).get("matchLabels", {})
        check(selector == {"breakerd/sidecar": "enabled"},
              f"PodMonitor selects breakerd/sidecar=enabled ({selector})")
        endpoints = pm["spec"].get("podMetricsEndpoints", [])
        check(len(endpoints) == 1, "one podMetricsEndpoint")
        names = {p.get("name") for p in (sidecar or {}).get("ports", [])}
        for ep in endpoints:
            check(ep.get("port") in names,
                  f"PodMonitor port `{ep.get('port')}` is a port name of the "
                  f"sidecar container ({sorted(n for n in names if n)})")
            check(ep.get("interval") == "15s", "scrape interval 15s")
            check(ep.get("path", "/metrics") == "/metrics", "path /metrics")
    cm = one(docs, "ConfigMap", "breakerd-grafana-dashboard")
    if cm is not None:
        labels = cm["metadata"].get("labels", {})
        check(labels.get("grafana_dashboard") == "1",
              'dashboard ConfigMap labelled grafana_dashboard: "1"')
        data = cm.get("data", {})
        check(list(data) == ["breakerd.json"], "one key, breakerd.json")
        text = data.get("breakerd.json", "")
        try:
            dash = json.loads(text)
            check(isinstance(dash, dict) and dash.get("uid"),
                  f"dashboard is valid JSON with a uid ({dash.get('uid')})")
        except ValueError as e:
            check(False, f"dashboard is valid JSON: {e}")
        # kubectl's client-side apply stores the object in an annotation
        # limited to 256 KiB.
        check(len(text.encode()) < 200 * 1024,
              f"dashboard {len(text.encode())} bytes, fits client-side apply")
        source = os.path.join(repo, "deploy/grafana/breakerd.json")
        if check(os.path.exists(source), "deploy/grafana/breakerd.json exists"):
            with open(source, encoding="utf-8") as f:
                check(f.read() == text,
                      "monitoring/breakerd.json is identical to "
                      "deploy/grafana/breakerd.json (if not: cp "
                      "deploy/grafana/breakerd.json deploy/kubernetes/monitoring/)")


def help_defaults(breakerd):
    """{flag: default} from `breakerd --help` ("  --flag=V" ... "default: D")."""
    proc = subprocess.run([breakerd, "--help"], capture_output=True,
                          text=True, timeout=30)
    defaults = {}
    flag = None
    for line in (proc.stdout + proc.stderr).splitlines():
        m = re.match(r"\s*--([a-z0-9-]+)", line)
        if m and line.lstrip().startswith("--"):
            flag = m.group(1)
            continue
        m = re.match(r"\s*default: (.*)$", line)
        if m and flag:
            defaults[flag] = m.group(1).strip()
    return defaults


def check_config_file(breakerd, label, config_text, expect_ok=True):
    """`breakerd --check-config FILE`, the CI check the READMEs recommend:
    exit 0 for a good file; 2 and FILE:LINE: errors for a bad one."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "config.yaml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(config_text)
        proc = subprocess.run([breakerd, "--check-config", path],
                              capture_output=True, text=True, timeout=30)
        out = (proc.stdout + proc.stderr).strip()
        errors = [line for line in out.splitlines()
                  if re.match(re.escape(path) + r":\d+: ", line)]
        passed = (proc.returncode == 0 if expect_ok
                  else proc.returncode == 2 and bool(errors))
        detail = ("" if passed or not out else
                  "\n    " + "\n    ".join(out.splitlines()[-5:]))
        if expect_ok:
            check(passed, f"[{label}] breakerd --check-config accepts the "
                  f"rendered config.yaml (exit {proc.returncode}){detail}")
        else:
            check(passed, f"[{label}] breakerd --check-config refuses it: "
                  f"exit {proc.returncode} (want 2), {len(errors)} errors "
                  f"as FILE:LINE:{detail}")


def check_config_loads(breakerd, label, config_text):
    """Starts the real binary on the rendered config: it must reach `serving`.
    Only for a breakerd without --check-config: one that has it falls back to
    a good config instead of failing, so reaching `serving` proves nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "config.yaml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(config_text)
        proc = subprocess.Popen(
            [breakerd, f"--config={path}", "--listen=127.0.0.1:0",
             "--metrics-listen=127.0.0.1:0", "--config-poll-interval=0"],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        lines = []
        serving = False
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line.strip())
            if '"event":"serving"' in line:
                serving = True
                break
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        detail = "" if serving else ":\n    " + "\n    ".join(lines[-5:])
        check(serving, f"[{label}] breakerd starts on the rendered "
              f"config.yaml{detail}")


def dockerfile_instructions(text):
    """(instruction, arguments) pairs, continuation lines joined."""
    out = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        word, _, rest = current.partition(" ")
        out.append((word.upper(), rest.strip()))
        current = ""
    return out


def build_targets(build_run):
    """The targets of every `cmake --build ... --target A B` in the build RUNs."""
    targets = []
    for m in re.finditer(r"--target((?:\s+[A-Za-z0-9_.+-]+)+)", build_run):
        for word in m.group(1).split():
            if word.startswith("-"):
                break
            targets.append(word)
    return targets


def check_dockerfile(repo, breakerd, breakerctl=None):
    """Structural checks of deploy/docker/Dockerfile (no Docker engine here)."""
    print("[docker] deploy/docker/Dockerfile")
    path = os.path.join(repo, "deploy/docker/Dockerfile")
    if not check(os.path.exists(path), "deploy/docker/Dockerfile exists"):
        return
    with open(path, encoding="utf-8") as f:
        ins = dockerfile_instructions(f.read())
    stages = []  # [(from-args, [instructions])]
    for word, rest in ins:
        if word == "FROM":
            stages.append((rest, []))
        elif stages:
            stages[-1][1].append((word, rest))
    check(len(stages) >= 2, f"multi-stage ({len(stages)} stages)")
    for base, _ in stages:
        image = base.split()[0]
        check(image.startswith("debian:12") or image.startswith("debian:bookworm"),
              f"stage base is Debian 12 ({image})")
    if len(stages) < 2:
        return
    build_name = stages[0][0].split()[-1]
    build = stages[0][1]
    runtime = stages[-1][1]
    build_run = " ".join(r for w, r in build if w == "RUN")
    with open(os.path.join(repo, "scripts/install-deps.sh"),
              encoding="utf-8") as f:
        known = set(f.read().split())
    apt_words = build_run.split("--no-install-recommends", 1)[-1].split("&&")[0]
    extra = sorted(set(apt_words.split()) - known)
    check(not extra, f"build stage installs only packages scripts/"
          f"install-deps.sh lists (extra: {extra})")
    check("-DCMAKE_BUILD_TYPE=Release" in build_run and "Ninja" in build_run,
          "build stage: cmake -G Ninja Release")
    targets = build_targets(build_run)
    check("breakerd" in targets and "breakerctl" in targets,
          f"build stage builds breakerd and breakerctl (targets: {targets})")
    runtime_run = " ".join(r for w, r in runtime if w == "RUN")
    check("-dev" not in runtime_run.replace("/dev/", ""),
          "runtime stage installs no -dev package")
    check("--no-install-recommends" in runtime_run,
          "runtime apt-get uses --no-install-recommends")
    check("rm -rf /var/lib/apt/lists" in runtime_run, "apt lists removed")
    copies = [r for w, r in runtime if w == "COPY"]
    for binary in ("breakerd", "breakerctl"):
        check(any(r.startswith(f"--from={build_name} ") and
                  r.split()[-2].endswith(f"/{binary}") and
                  r.endswith(f"/usr/local/bin/{binary}") for r in copies),
              f"runtime copies {binary} from the build stage to "
              f"/usr/local/bin/{binary} (kubectl exec ... -- {binary})")
    users = [r for w, r in runtime if w == "USER"]
    check(users and users[-1].split(":")[0] == "65532",
          f"runs as the numeric non-root user 65532 ({users[-1:]})")
    entry = [r for w, r in runtime if w == "ENTRYPOINT"]
    check(entry and json.loads(entry[-1]) == ["/usr/local/bin/breakerd"],
          'ENTRYPOINT ["/usr/local/bin/breakerd"] (exec form)')
    expose = " ".join(r for w, r in runtime if w == "EXPOSE").split()
    check("9464" in expose, f"EXPOSE 9464 ({expose})")
    health = [r for w, r in runtime if w == "HEALTHCHECK"]
    check(health == ["NONE"], "HEALTHCHECK NONE (Kubernetes probes instead)")
    ignore = os.path.join(repo, ".dockerignore")
    if check(os.path.exists(ignore), ".dockerignore exists"):
        with open(ignore, encoding="utf-8") as f:
            patterns = f.read().split()
        check("build*/" in patterns or "build*" in patterns,
              ".dockerignore excludes build*/")
    binaries = [b for b in (breakerd, breakerctl) if b]
    if not binaries:
        return
    # Every shared library the real binaries load comes from a package the
    # runtime stage installs (or that debian:12-slim already has).
    base_image = {"libc6", "libstdc++6", "libgcc-s1", "zlib1g"}
    libs = []
    for binary in binaries:
        proc = subprocess.run(["ldd", binary], capture_output=True, text=True)
        libs += [line.split("=>")[1].split()[0]
                 for line in proc.stdout.splitlines()
                 if "=>" in line and "/" in line.split("=>")[1]]
    libs = sorted(set(libs))
    packages = set()
    for lib in libs:
        real = os.path.realpath(lib)
        found = None
        for candidate in (real, lib, lib.replace("/lib/", "/usr/lib/", 1)):
            q = subprocess.run(["dpkg", "-S", candidate], capture_output=True,
                               text=True)
            if q.returncode == 0:
                found = q.stdout.split(":")[0]
                break
        if found is None:
            print(f"  note cannot map {lib} to a Debian package (not Debian?)")
            return
        packages.add(found)
    missing = sorted(p for p in packages - base_image if p not in runtime_run.split())
    names = " and ".join(os.path.basename(b) for b in binaries)
    check(not missing, f"runtime stage installs every package {names} link "
          f"({len(packages)} packages; missing: {missing})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kustomize", default="")
    ap.add_argument("--breakerd")
    ap.add_argument("--breakerctl")
    ap.add_argument("--dockerfile-only", action="store_true",
                    help="no renderer: check only the Dockerfile")
    ap.add_argument("--repo", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    args = ap.parse_args()
    k8s = os.path.join(args.repo, "deploy", "kubernetes")
    global TRACE_MAX_BYTES_DEFAULT
    defaults = help_defaults(args.breakerd) if args.breakerd else {}
    if "trace-max-bytes" in defaults:
        TRACE_MAX_BYTES_DEFAULT = int(defaults["trace-max-bytes"])
    if args.dockerfile_only:
        check_dockerfile(args.repo, args.breakerd, args.breakerctl)
        return 1 if FAILURES else 0

    print("[overlays/example-app] render")
    native_docs = render(args.kustomize, os.path.join(k8s, "overlays/example-app"))
    native = check_sidecar(native_docs, "overlays/example-app", native=True)
    check_client_address(native_docs, "overlays/example-app", args.repo, native)
    print("[overlays/legacy] render")
    legacy_docs = render(args.kustomize, os.path.join(k8s, "overlays/legacy"))
    legacy = check_sidecar(legacy_docs, "overlays/legacy", native=False)
    if native and legacy:
        check(strip_flavour(native) == strip_flavour(legacy),
              "legacy container equals the native one but for restartPolicy "
              "and lifecycle (components/*/sidecar.yaml in step)")
    print("[monitoring] render")
    check_monitoring(render(args.kustomize, os.path.join(k8s, "monitoring")),
                     args.repo, native)

    if args.breakerd:
        configs = {}
        for label, path in (
                ("components default", "components/breakerd-common/config.yaml"),
                ("image default", "../config/breakerd.yaml")):
            with open(os.path.join(k8s, path), encoding="utf-8") as f:
                configs[label] = f.read()
        for label, docs in (("example-app", native_docs),
                            ("legacy", legacy_docs)):
            for cm in find(docs, "ConfigMap"):
                if cm["metadata"]["name"].endswith("breakerd-config"):
                    configs[label] = cm["data"]["config.yaml"]
        if "check-config" in defaults:
            print("[config] breakerd --check-config on every rendered config")
            for label, text in configs.items():
                check_config_file(args.breakerd, label, text)
            # The CI check catches a bad file (what a bad ConfigMap would be).
            check_config_file(args.breakerd, "a bad config",
                              "defaults:\n  consecutive_failures: -1\n"
                              "  no_such_key: 1\n", expect_ok=False)
        else:
            print("[config] the rendered configs load in the real binary "
                  "(this breakerd has no --check-config)")
            for label, text in configs.items():
                check_config_loads(args.breakerd, label, text)

    check_dockerfile(args.repo, args.breakerd, args.breakerctl)

    if FAILURES:
        print(f"\n{len(FAILURES)} check(s) failed:")
        for f in FAILURES:
            print(f"  - {f.splitlines()[0]}")
        return 1
    print("\nall Kubernetes checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
