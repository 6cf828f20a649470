# shellcheck shell=bash
# What the bench run.sh scripts share, sourced by them: their command line,
# waiting for a server started here to serve, and stopping it cleanly.
# Messages go to stderr, prefixed "run.sh:".

# parse_run_args DEFAULT_BREAKERD "$@": reads "[--smoke] OUTDIR [BREAKERD]"
# into smoke (0 or 1), outdir and breakerd (else env BREAKERD, else
# DEFAULT_BREAKERD); exits 2 with the usage if the command line is wrong.
parse_run_args() {
  local default_breakerd=$1
  shift
  smoke=0
  if [[ "${1:-}" == "--smoke" ]]; then
    smoke=1
    shift
  fi
  if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: $0 [--smoke] OUTDIR [BREAKERD]" >&2
    exit 2
  fi
  outdir=$1
  breakerd=${2:-${BREAKERD:-$default_breakerd}}
}

# require_executables WHAT EXE...: exits 2 unless every EXE is executable,
# saying to build WHAT (Release) first.
require_executables() {
  local what=$1 exe
  shift
  for exe in "$@"; do
    if [[ ! -x $exe ]]; then
      echo "run.sh: $exe is missing; build $what (Release) first" >&2
      exit 2
    fi
  done
}

# wait_serving NAME PID LOG: waits (at most 10 s) for the JSON "serving"
# line in LOG and prints its "grpc" addresses (comma-separated). Returns 1,
# with LOG on stderr, if NAME (process PID) did not start.
wait_serving() {
  local name=$1 pid=$2 log=$3 line
  for _ in $(seq 200); do
    line=$(grep -m1 '"event":"serving"' "$log" || true)
    if [[ -n $line ]]; then
      sed -n 's/.*"grpc":"\([^"]*\)".*/\1/p' <<<"$line"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.05
  done
  echo "run.sh: $name did not start; its log:" >&2
  cat "$log" >&2
  return 1
}

# stop_server NAME PID LOG: SIGTERM, then waits (at most 15 s) for a clean
# exit. Returns 1 if it had to be killed or exited non-zero (then with the
# end of LOG on stderr); 0 at once if PID is empty.
stop_server() {
  local name=$1 pid=$2 log=$3 rc=0
  [[ -n $pid ]] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "run.sh: $name did not stop after SIGTERM; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    return 1
  fi
  wait "$pid" || rc=$?
  if ((rc != 0)); then
    echo "run.sh: $name exited with $rc; its log:" >&2
    tail -n 50 "$log" >&2
    return 1
  fi
}
