#!/usr/bin/env bash
# Tests the Python client against a real breakerd:
#   BREAKERD_BIN=/path/to/breakerd client/python/test.sh [pytest args...]
# Creates client/python/.venv (Python >= 3.10: $PYTHON or python3) from
# requirements-dev.txt, checks the generated stubs, type-checks with
# mypy --strict, runs pytest; then, if a Python 3.9 is found ($BREAKERD_PY39,
# python3.9 or pyenv's), runs the suite again on it in .venv39
# (BREAKERD_PY39=skip skips that).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

if [[ -z ${BREAKERD_BIN:-} ]]; then
  echo "test.sh: set BREAKERD_BIN to the breakerd binary" >&2
  exit 2
fi
if [[ ! -f $BREAKERD_BIN || ! -x $BREAKERD_BIN ]]; then
  echo "test.sh: BREAKERD_BIN=$BREAKERD_BIN is not an executable file" >&2
  exit 2
fi
BREAKERD_BIN=$(cd "$(dirname "$BREAKERD_BIN")" && pwd)/$(basename "$BREAKERD_BIN")
export BREAKERD_BIN
export PIP_DISABLE_PIP_VERSION_CHECK=1

step() { printf '\n== %s\n' "$*"; }

# make_venv DIR PYTHON REQUIREMENTS: (re)create DIR when missing or broken
# and install REQUIREMENTS when they changed since the last run.
make_venv() {
  local dir=$1 python=$2 reqs=$3 stamp
  if ! "$dir/bin/python" -c 'import sys' 2>/dev/null; then
    rm -rf "$dir"
    "$python" -m venv "$dir"
  fi
  stamp=$(sha256sum "$reqs" | cut -d' ' -f1)
  if [[ $(cat "$dir/.requirements-stamp" 2>/dev/null) != "$stamp" ]]; then
    "$dir/bin/python" -m pip install -q -r "$reqs"
    echo "$stamp" > "$dir/.requirements-stamp"
  fi
}

# install_package VENV: install the wheel built from this folder, as users do.
install_package() {
  "$1/bin/python" -m pip install -q --no-deps --force-reinstall "$wheel_dir"/breakerd-*.whl
  "$1/bin/python" -m pip check
}

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "test.sh: $python is older than 3.10 (needed by the pinned test tools); set PYTHON" >&2
  exit 2
fi

step "dependencies (.venv, $("$python" --version))"
make_venv .venv "$python" requirements-dev.txt
wheel_dir=$(mktemp -d "${TMPDIR:-/tmp}/breakerd-py-wheel.XXXXXX")
trap 'rm -rf "$wheel_dir"' EXIT
.venv/bin/python -m pip wheel -q --no-deps --no-build-isolation -w "$wheel_dir" "$here"
install_package .venv

step "generated stubs"
scripts/gen_proto.sh --check

step "mypy --strict (package, tests, example)"
.venv/bin/mypy

step "pytest"
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"

find_py39() {
  local c
  for c in "${BREAKERD_PY39:-}" python3.9 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.9*/bin/python3.9; do
    if [[ -n $c ]] && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 9))' 2>/dev/null; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

if [[ ${BREAKERD_PY39:-} == skip ]]; then
  echo "Python 3.9 run skipped (BREAKERD_PY39=skip)"
elif py39=$(find_py39); then
  step "pytest on Python 3.9 (.venv39, oldest supported)"
  make_venv .venv39 "$py39" requirements-py39.txt
  install_package .venv39
  .venv39/bin/python -m pytest -q -p no:cacheprovider "$@"
else
  echo "no Python 3.9 found: the 3.9 run is skipped"
fi
