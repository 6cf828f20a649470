#!/usr/bin/env python3
"""Two applications with the breakerd sidecar in one namespace.

Renders, offline, two apps (shop-api and billing-api) that both use
deploy/kubernetes/components/breakerd-sidecar in the namespace `team`, each
with components/breakerd-per-app, and asserts that they do not share or
overwrite each other's objects:

  - each app's render holds its own ConfigMap <app>-breakerd-config (and
    shop its generated Secret <app>-breakerd-admin-token; billing's Secret
    is created out of band, so only referenced);
  - applied one after the other, no object of one app has the same kind,
    namespace and name as an object of the other;
  - rendered together (one kustomization for the namespace), the build
    succeeds and each pod's breakerd container mounts its own ConfigMap and
    Secret, and the ConfigMap holds its own app's policies;
  - the local-config object that names the app is not deployed;
  - control: the same two apps without breakerd-per-app both make
    `breakerd-config` (so this test can see the collision it guards
    against).

Usage: check_two_apps.py [--kustomize CMD] [--repo DIR]
The renderer is --kustomize (the directory is appended), else $KUSTOMIZE,
else `kubectl kustomize`, else `kustomize build`, else the kustomize that
tests/deploy/check_kubernetes.sh installs in ~/.cache/breakerd-tools.
Exit: 0 passed, 1 a check failed, 77 skipped (no renderer or no PyYAML).
"""

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_util import FAILURES, SKIP, check, find_renderer, render  # noqa: E402

NAMESPACE = "team"


def key(obj):
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace", ""), meta["name"])


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {app}-api
  labels:
    app.kubernetes.io/name: {app}-api
    breakerd/sidecar: enabled
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: {app}-api
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {app}-api
    spec:
      containers:
        - name: app
          image: registry.example/{app}:1.0
          env:
            - name: BREAKERD_ADDR
              value: 127.0.0.1:50051
"""

# shop's own policies: a Component replacing breakerd-config, as in
# overlays/example-app/breakerd-policies.
SHOP_POLICIES = """\
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
configMapGenerator:
  - name: breakerd-config
    behavior: replace
    files:
      - config.yaml
    options:
      disableNameSuffixHash: true
"""
SHOP_CONFIG = """\
policies:
  - match: "psp/*"
    consecutive_failures: 3
"""


def app_kustomization(app, comp, per_app, policies, secret):
    lines = [
        "apiVersion: kustomize.config.k8s.io/v1beta1",
        "kind: Kustomization",
        f"namespace: {NAMESPACE}",
        "resources:",
        "  - deployment.yaml",
        "components:",
        f"  - {comp}/breakerd-sidecar",
    ]
    if policies:
        lines.append("  - policies")
    if per_app:
        lines += [
            f"  - {comp}/breakerd-per-app",
            "configMapGenerator:",
            "  - name: breakerd-per-app",
            "    literals:",
            f"      - name={app}",
            "    options:",
            "      annotations:",
            '        config.kubernetes.io/local-config: "true"',
        ]
    if secret:
        lines += [
            "secretGenerator:",
            "  - name: breakerd-admin-token",
            "    literals:",
            f"      - token=placeholder-{app}",
            "    options:",
            "      disableNameSuffixHash: true",
        ]
    return "\n".join(lines) + "\n"


def make_tree(root, repo, per_app):
    """root/<app>/ for shop and billing, and root/team/ holding both."""
    components = os.path.join(repo, "deploy", "kubernetes", "components")
    for app in ("shop", "billing"):
        base = os.path.join(root, app)
        comp = os.path.relpath(components, base)
        write(os.path.join(base, "deployment.yaml"), DEPLOYMENT.format(app=app))
        # shop: own policies and a generated Secret; billing: the
        # component's default config and a Secret created out of band.
        shop = app == "shop"
        write(os.path.join(base, "kustomization.yaml"),
              app_kustomization(app, comp, per_app, policies=shop, secret=shop))
        if shop:
            write(os.path.join(base, "policies", "kustomization.yaml"),
                  SHOP_POLICIES)
            write(os.path.join(base, "policies", "config.yaml"), SHOP_CONFIG)
    write(os.path.join(root, "team", "kustomization.yaml"),
          "apiVersion: kustomize.config.k8s.io/v1beta1\n"
          "kind: Kustomization\n"
          "resources:\n  - ../shop\n  - ../billing\n")


def sidecar_refs(deployment):
    """(ConfigMap, Secret) the breakerd container's --config and
    --admin-token-file are read from, following its mounts to the volumes."""
    spec = deployment["spec"]["template"]["spec"]
    containers = spec.get("initContainers", []) + spec.get("containers", [])
    sidecar = [c for c in containers if c["name"] == "breakerd"]
    if not check(len(sidecar) == 1,
                 f"{deployment['metadata']['name']}: one breakerd container"):
        return None, None
    c = sidecar[0]
    flags = dict(a[2:].split("=", 1) for a in c.get("args", [])
                 if a.startswith("--") and "=" in a)
    volumes = {v["name"]: v for v in spec.get("volumes", [])}

    def volume_for(path):
        mounts = [m for m in c.get("volumeMounts", [])
                  if path.startswith(m["mountPath"].rstrip("/") + "/")]
        return volumes.get(mounts[0]["name"], {}) if len(mounts) == 1 else {}

    cm = volume_for(flags.get("config", "")).get("configMap", {}).get("name")
    secret = volume_for(flags.get("admin-token-file", "")).get(
        "secret", {}).get("secretName")
    return cm, secret


def check_with_per_app(kustomize, root):
    rendered = {}
    for app in ("shop", "billing"):
        print(f"[{app}] rendered alone (kubectl apply -k {app}/)")
        docs, err = render(kustomize, os.path.join(root, app))
        if not check(err is None, f"{app} renders{': ' + err if err else ''}"):
            continue
        rendered[app] = docs
        cms = [d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap"]
        check(cms == [f"{app}-breakerd-config"],
              f"{app}: its ConfigMap is {app}-breakerd-config ({cms})")
        secrets = [d["metadata"]["name"] for d in docs if d["kind"] == "Secret"]
        want = [f"{app}-breakerd-admin-token"] if app == "shop" else []
        check(secrets == want, f"{app}: Secrets {want} ({secrets})")
        check(all(d["metadata"]["name"] != "breakerd-per-app" for d in docs),
              f"{app}: the local-config breakerd-per-app is not deployed")

    if len(rendered) == 2:
        print("[shop + billing] applied one after the other")
        shop = {key(d) for d in rendered["shop"]}
        billing = {key(d) for d in rendered["billing"]}
        shared = sorted(shop & billing)
        check(not shared, f"no object is in both apps (shared: {shared})")

    print(f"[team] both apps rendered in one kustomization, namespace "
          f"{NAMESPACE}")
    docs, err = render(kustomize, os.path.join(root, "team"))
    if not check(err is None, f"team renders{': ' + err if err else ''}"):
        return
    keys = [key(d) for d in docs]
    check(len(keys) == len(set(keys)), "no duplicate object")
    configmaps = {d["metadata"]["name"]: d for d in docs
                  if d["kind"] == "ConfigMap"}
    check(sorted(configmaps) == ["billing-breakerd-config",
                                 "shop-breakerd-config"],
          f"two distinct ConfigMaps ({sorted(configmaps)})")
    deployments = {d["metadata"]["name"]: d for d in docs
                   if d["kind"] == "Deployment"}
    check(sorted(deployments) == ["billing-api", "shop-api"],
          f"both Deployments ({sorted(deployments)})")
    seen = {}
    for app in ("shop", "billing"):
        d = deployments.get(f"{app}-api")
        if d is None:
            continue
        check(d["metadata"].get("namespace") == NAMESPACE,
              f"{app}-api in namespace {NAMESPACE}")
        cm, secret = sidecar_refs(d)
        seen[app] = (cm, secret)
        check(cm == f"{app}-breakerd-config",
              f"{app}-api's breakerd reads --config from its own ConfigMap "
              f"({cm})")
        check(secret == f"{app}-breakerd-admin-token",
              f"{app}-api's breakerd reads its token from its own Secret "
              f"({secret})")
        text = configmaps.get(cm, {}).get("data", {}).get("config.yaml", "")
        has_shop_policy = '"psp/*"' in text
        check(has_shop_policy == (app == "shop"),
              f"{cm} holds {app}'s policies "
              f"({'its own' if app == 'shop' else 'the component default'})")
    if len(seen) == 2:
        check(seen["shop"][0] != seen["billing"][0]
              and seen["shop"][1] != seen["billing"][1],
              "the two pods reference different ConfigMaps and Secrets")


def check_control(kustomize, root):
    print("[control] the same apps without breakerd-per-app")
    names = {}
    for app in ("shop", "billing"):
        docs, err = render(kustomize, os.path.join(root, app))
        if not check(err is None, f"{app} renders{': ' + err if err else ''}"):
            return
        names[app] = [d["metadata"]["name"] for d in docs
                      if d["kind"] == "ConfigMap"]
    check(names["shop"] == names["billing"] == ["breakerd-config"],
          f"both make ConfigMap breakerd-config: the collision this guards "
          f"against ({names})")
    _, err = render(kustomize, os.path.join(root, "team"))
    check(err is not None,
          "rendered together, kustomize refuses the duplicate ConfigMap")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kustomize", default="")
    ap.add_argument("--repo", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    args = ap.parse_args()
    kustomize = find_renderer(args.kustomize)
    if not kustomize:
        print("SKIPPED: no kubectl or kustomize (tests/deploy/"
              "check_kubernetes.sh can install kustomize)")
        return SKIP
    print(f"--- render with: {kustomize}")
    repo = os.path.abspath(args.repo)
    with tempfile.TemporaryDirectory() as tmp:
        make_tree(os.path.join(tmp, "per-app"), repo, per_app=True)
        make_tree(os.path.join(tmp, "plain"), repo, per_app=False)
        check_with_per_app(kustomize, os.path.join(tmp, "per-app"))
        check_control(kustomize, os.path.join(tmp, "plain"))
    if FAILURES:
        print(f"\n{len(FAILURES)} check(s) failed:")
        for f in FAILURES:
            print(f"  - {f.splitlines()[0]}")
        return 1
    print("\nall two-app checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
