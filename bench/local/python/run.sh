#!/usr/bin/env bash
# bench/local for the Python client: bench.py against a breakerd of
# bench/local/breakerd.yaml. Usage: run.sh [--smoke] OUT.json
# Runs in client/python/.venv (what its test.sh installs, pybreaker
# included: requirements-dev.txt pins it), made here if missing; imports the
# client from its source tree, so it measures the code as it is.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/local/lib.sh
source "$here/../lib.sh"
parse_local_args "$@"
smoke_flag=()
((smoke)) && smoke_flag=(--smoke)

client=$root_dir/client/python
venv=$client/.venv
if ! "$venv/bin/python" -c 'import grpc, google.protobuf, grpc_health, pybreaker' 2>/dev/null; then
  python=${PYTHON:-python3}
  "$venv/bin/python" -c 'import sys' 2>/dev/null || "$python" -m venv "$venv"
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install -q \
    -r "$client/requirements-dev.txt"
fi

bench() {
  # GRPC_ENABLE_FORK_SUPPORT: nothing forks here; off, grpc installs no fork
  # handlers. PYTHONPATH: the client's source, not an installed wheel.
  GRPC_ENABLE_FORK_SUPPORT=false PYTHONPATH=$client/src \
    "$venv/bin/python" "$here/bench.py" "$BREAKERD_ADDR" "$BREAKERD_PID" "$out" "${smoke_flag[@]}"
}
run_local_bench python bench
