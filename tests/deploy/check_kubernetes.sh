#!/usr/bin/env bash
# Offline checks of deploy/: yamllint on deploy/, then every kustomization
# under deploy/kubernetes rendered and checked (tests/deploy/check_kubernetes.py),
# plus the Dockerfile's structure. No cluster, no Docker engine.
#
# Usage: tests/deploy/check_kubernetes.sh [path/to/breakerd [path/to/breakerctl]]
#   With breakerd, the rendered breakerd configs are also checked by it
#   (`breakerd --check-config`) and the Dockerfile's runtime packages are
#   compared with what it links; with breakerctl, with what both link.
#
# Tools, found or installed in this order (installs go to $BREAKERD_TOOLS_DIR,
# default ~/.cache/breakerd-tools, and are reused by later runs):
#   render:   $KUSTOMIZE (a command taking the directory last), `kubectl
#             kustomize`, `kustomize build`, a cached kustomize, or
#             `go install sigs.k8s.io/kustomize/kustomize/v5` through the Go
#             module proxy (Go from PATH, else apt's golang-go when root).
#             About 2.5 minutes the first time, seconds after. If none of
#             that works the render checks are SKIPPED (exit 77) with a
#             message; set BREAKERD_REQUIRE_RENDER=1 to make that a failure.
#   yamllint, PyYAML: on PATH / importable, else pip --target into the
#             tools dir (works under Debian's PEP 668), else apt when root.
#   BREAKERD_APT_INSTALL=0 forbids the apt-get fallbacks.
# Exit: 0 all passed, 1 a check failed, 77 passed but the render was skipped.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
breakerd="${1:-}"
if [ -n "$breakerd" ] && [ ! -x "$breakerd" ]; then
  echo "--- note: $breakerd is not built; the checks that run it are skipped"
  breakerd=""
fi
breakerctl="${2:-}"
if [ -n "$breakerctl" ] && [ ! -x "$breakerctl" ]; then
  echo "--- note: $breakerctl is not built; its library check is skipped"
  breakerctl=""
fi
tools="${BREAKERD_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/breakerd-tools}"
mkdir -p "$tools/bin" "$tools/py"
export PYTHONPATH="$tools/py${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$tools/bin:$PATH"

log() { echo "--- $*"; }
is_root() { [ "$(id -u)" -eq 0 ]; }

apt_install() {
  [ "${BREAKERD_APT_INSTALL:-1}" = 1 ] && is_root &&
    command -v apt-get > /dev/null || return 1
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends "$@" > "$tools/apt.log" 2>&1 ||
    { apt-get update -q > /dev/null 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends "$@" > "$tools/apt.log" 2>&1; }
}

pip_install() {
  python3 -m pip --version > /dev/null 2>&1 || return 1
  log "pip install --target $tools/py $*"
  python3 -m pip install -q --disable-pip-version-check --target "$tools/py" \
    "$@" > "$tools/pip.log" 2>&1 || { cat "$tools/pip.log"; return 1; }
}

# --- Python tools --------------------------------------------------------------
if ! python3 -c 'import yaml' 2> /dev/null; then
  pip_install pyyaml || apt_install python3-yaml || {
    echo "FAIL: PyYAML is missing and could not be installed" >&2; exit 1; }
fi
if command -v yamllint > /dev/null; then
  yamllint=(yamllint)
elif python3 -m yamllint --version > /dev/null 2>&1 ||
     pip_install yamllint; then
  yamllint=(python3 -m yamllint)
elif apt_install yamllint; then
  yamllint=(yamllint)
else
  echo "FAIL: yamllint is missing and could not be installed" >&2; exit 1
fi

# --- the kustomize renderer ------------------------------------------------------
go_install_kustomize() {
  if ! command -v go > /dev/null; then
    [ -x /usr/lib/go/bin/go ] || apt_install golang-go || return 1
    export PATH="$PATH:/usr/lib/go/bin"
  fi
  # The newest kustomize release this Go can build (go.mod's go directive).
  local minor version
  minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
  if [ "$minor" -ge 21 ]; then version=v5.4.3
  elif [ "$minor" -ge 20 ]; then version=v5.3.0
  elif [ "$minor" -ge 19 ]; then version=v5.0.3
  else echo "go $(go env GOVERSION) is too old for kustomize v5" >&2; return 1
  fi
  log "go install sigs.k8s.io/kustomize/kustomize/v5@$version (Go module proxy)"
  local t0=$SECONDS
  GOBIN="$tools/bin" GOFLAGS=-mod=mod \
    go install "sigs.k8s.io/kustomize/kustomize/v5@$version" \
    > "$tools/go-install.log" 2>&1 || { tail -20 "$tools/go-install.log"; return 1; }
  log "kustomize $version installed in $((SECONDS - t0)) s"
}

render=""
if [ -n "${KUSTOMIZE:-}" ]; then
  render="$KUSTOMIZE"
elif command -v kubectl > /dev/null && kubectl kustomize --help > /dev/null 2>&1; then
  render="kubectl kustomize"
elif command -v kustomize > /dev/null; then
  render="kustomize build"
elif go_install_kustomize; then
  render="$tools/bin/kustomize build"
fi

# --- run -------------------------------------------------------------------------
status=0
log "yamllint --strict deploy/ (${yamllint[*]}, config .yamllint)"
if (cd "$repo" && "${yamllint[@]}" --strict -c .yamllint deploy/); then
  echo "  ok   yamllint deploy/"
else
  echo "  FAIL yamllint deploy/"; status=1
fi

args=(--repo "$repo")
[ -n "$breakerd" ] && args+=(--breakerd "$breakerd")
[ -n "$breakerctl" ] && args+=(--breakerctl "$breakerctl")
if [ -n "$render" ]; then
  log "render with: $render"
  python3 "$repo/tests/deploy/check_kubernetes.py" --kustomize "$render" \
    "${args[@]}" || status=1
else
  msg="SKIPPED the Kustomize render checks: no kubectl, no kustomize, and"
  msg+=" kustomize could not be installed with go (see $tools/*.log)."
  echo "$msg" >&2
  # The Dockerfile checks need no renderer.
  python3 "$repo/tests/deploy/check_kubernetes.py" --kustomize "" \
    --dockerfile-only "${args[@]}" || status=1
  if [ "$status" -eq 0 ]; then
    [ "${BREAKERD_REQUIRE_RENDER:-0}" = 1 ] && exit 1
    exit 77
  fi
fi
exit "$status"
