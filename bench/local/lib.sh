# shellcheck shell=bash
# Sourced by bench/local/<language>/run.sh: starts one breakerd for a
# language's local-decision benchmark and stops it.
#
#   start_local_breakerd OUTDIR   starts $BREAKERD_BIN (default: the release
#                                 tree's build-bench/breakerd, else build/)
#                                 with bench/local/breakerd.yaml on free
#                                 loopback ports; exports BREAKERD_ADDR
#                                 (host:port), BREAKERD_METRICS (host:port
#                                 of /metrics) and BREAKERD_PID (for its CPU
#                                 time: /proc/$BREAKERD_PID/stat)
#   stop_local_breakerd           SIGTERM and wait
local_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root_dir=$(cd "$local_dir/../.." && pwd)
# shellcheck source=bench/lib.sh
source "$root_dir/bench/lib.sh"

start_local_breakerd() {
  local out=$1 bin=${BREAKERD_BIN:-}
  if [[ -z $bin ]]; then
    bin=$root_dir/build-bench/breakerd
    [[ -x $bin ]] || bin=$root_dir/build/breakerd
  fi
  require_executables breakerd "$bin"
  mkdir -p "$out"
  local_log=$out/breakerd.log
  "$bin" --config="$local_dir/breakerd.yaml" --listen=127.0.0.1:0 \
    --metrics-listen=127.0.0.1:0 2> "$local_log" &
  BREAKERD_PID=$!
  BREAKERD_ADDR=$(wait_serving breakerd "$BREAKERD_PID" "$local_log")
  BREAKERD_METRICS=$(sed -n 's/.*"metrics":"\([^"]*\)".*/\1/p' "$local_log" |
    head -1)
  export BREAKERD_ADDR BREAKERD_METRICS BREAKERD_PID
}

stop_local_breakerd() {
  stop_server breakerd "${BREAKERD_PID:-}" "$local_log"
}

# parse_local_args "$@": reads "[--smoke] OUT.json" into smoke (0 or 1) and
# out (made absolute); exits 2 with the usage otherwise.
parse_local_args() {
  smoke=0
  if [[ "${1:-}" == "--smoke" ]]; then
    smoke=1
    shift
  fi
  if [[ $# -ne 1 ]]; then
    echo "usage: $0 [--smoke] OUT.json" >&2
    exit 2
  fi
  out=$1
  case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
}

# run_local_bench NAME CMD...: starts breakerd (start_local_breakerd in a
# temporary directory), runs CMD (a function can read BREAKERD_ADDR,
# BREAKERD_METRICS and BREAKERD_PID), stops breakerd and prints $out.
run_local_bench() {
  local name=$1
  shift
  local_work=$(mktemp -d "${TMPDIR:-/tmp}/bench-local-$name.XXXXXX")
  trap 'stop_local_breakerd || true; rm -rf "$local_work"' EXIT
  start_local_breakerd "$local_work"
  "$@"
  stop_local_breakerd
  trap 'rm -rf "$local_work"' EXIT
  cat "$out"
}
