"""What the offline deploy checks share: the PyYAML import (installed by
check_kubernetes.sh when the system lacks it), the kustomize renderer and
the check/FAILURES reporting."""

import os
import shlex
import shutil
import subprocess
import sys

SKIP = 77
TOOLS = os.environ.get("BREAKERD_TOOLS_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
    "breakerd-tools")

try:
    import yaml
except ImportError:
    sys.path.insert(0, os.path.join(TOOLS, "py"))
    try:
        import yaml
    except ImportError:
        print("SKIPPED: PyYAML is missing (tests/deploy/check_kubernetes.sh "
              "installs it)")
        sys.exit(SKIP)

FAILURES = []


def check(cond, what):
    print(f"  {'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        FAILURES.append(what)
    return cond


def find_renderer(given):
    """The kustomize command: --kustomize, $KUSTOMIZE, `kubectl kustomize`,
    `kustomize build`, or the one check_kubernetes.sh caches; None if none."""
    if given:
        return given
    if os.environ.get("KUSTOMIZE"):
        return os.environ["KUSTOMIZE"]
    if shutil.which("kubectl") and subprocess.run(
            ["kubectl", "kustomize", "--help"], capture_output=True).returncode == 0:
        return "kubectl kustomize"
    if shutil.which("kustomize"):
        return "kustomize build"
    cached = os.path.join(TOOLS, "bin", "kustomize")
    if os.access(cached, os.X_OK):
        return f"{cached} build"
    return None


def render(kustomize, path):
    """(objects, error): the rendered objects, or the renderer's error."""
    proc = subprocess.run(shlex.split(kustomize) + [path], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        return [], proc.stderr.strip() or f"exit {proc.returncode}"
    return [d for d in yaml.safe_load_all(proc.stdout) if d], None
