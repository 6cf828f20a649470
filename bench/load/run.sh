#!/usr/bin/env bash
# Runs breakerd_load over the matrix transport {tcp, unix} x inflight {1, 64}
# against a release breakerd and the echo_server floor, both started here on
# free ports (TCP port 0 and a unix socket in a temp dir), and writes
# OUTDIR/load_<transport>_<inflight>.json (+ .txt, the human table).
#
# Usage: bench/load/run.sh [--smoke] OUTDIR [BREAKERD]
#   BREAKERD        the breakerd binary (or env BREAKERD; default
#                   build-rel/breakerd). echo_server and breakerd_load are
#                   taken from the same directory unless LOAD_BIN_DIR is set.
#   --smoke         each measurement ~0.2 s, one round: checks that it works.
#   LOAD_DURATION, LOAD_WARMUP, LOAD_ROUNDS override the full-mode settings
#   (1.5 s timed + 0.25 s warmup per measurement, 6 rounds of 5 calls per
#   cell: about 3.6 minutes in all). Short measurements in many rounds
#   interleave breakerd and the floor finely, so a burst of other work on
#   the machine lands on both.
#
# Exits non-zero if a server does not start or stop cleanly or any call
# failed. Never asserts on timing.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
parse_run_args "$root/build-rel/breakerd" "$@"
bin_dir=${LOAD_BIN_DIR:-$(dirname "$breakerd")}
load=$bin_dir/breakerd_load
echo_server=$bin_dir/echo_server
require_executables "breakerd, echo_server and breakerd_load" \
  "$breakerd" "$load" "$echo_server"

if ((smoke)); then
  duration=0.2 warmup=0.05 rounds=1
else
  duration=${LOAD_DURATION:-1.5} warmup=${LOAD_WARMUP:-0.25}
  rounds=${LOAD_ROUNDS:-6}
fi

mkdir -p "$outdir"
# Short, so the unix socket paths fit in sun_path.
tmp=$(mktemp -d /tmp/bdload.XXXXXX)
breakerd_pid="" echo_pid=""

cleanup() {
  stop_server echo_server "$echo_pid" "$tmp/echo_server.log" || true
  stop_server breakerd "$breakerd_pid" "$tmp/breakerd.log" || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# address_of ADDRESSES tcp|unix
address_of() {
  tr ',' '\n' <<<"$1" | if [[ $2 == unix ]]; then grep '^unix:'; else
    grep -v '^unix:'; fi | head -1
}

"$breakerd" --listen="127.0.0.1:0,unix:$tmp/breakerd.sock" \
  --metrics-listen=127.0.0.1:0 >"$tmp/breakerd.log" 2>&1 &
breakerd_pid=$!
"$echo_server" --listen="127.0.0.1:0,unix:$tmp/echo.sock" \
  >"$tmp/echo_server.log" 2>&1 &
echo_pid=$!
breakerd_addrs=$(wait_serving breakerd "$breakerd_pid" "$tmp/breakerd.log")
echo_addrs=$(wait_serving echo_server "$echo_pid" "$tmp/echo_server.log")
echo "breakerd: $breakerd_addrs (pid $breakerd_pid)"
echo "echo_server: $echo_addrs (pid $echo_pid)"

failed=0
start=$(date +%s.%N)
for transport in tcp unix; do
  target=$(address_of "$breakerd_addrs" "$transport")
  floor=$(address_of "$echo_addrs" "$transport")
  for inflight in 1 64; do
    # One connection for one call in flight; for 64, four connections, so
    # each server spreads the load over several transports (and pollers)
    # instead of funnelling every stream through one HTTP/2 connection.
    channels=1
    ((inflight == 1)) || channels=4
    cell=load_${transport}_${inflight}
    echo "== $cell: $target vs $floor, $channels channel(s)"
    rc=0
    "$load" --target="$target" --floor="$floor" --inflight="$inflight" \
      --channels="$channels" --duration="$duration" --warmup="$warmup" \
      --rounds="$rounds" --target_pid="$breakerd_pid" \
      --floor_pid="$echo_pid" --json="$outdir/$cell.json" \
      >"$outdir/$cell.txt" || rc=$?
    cat "$outdir/$cell.txt"
    if ((rc != 0)); then
      echo "run.sh: $cell failed (exit $rc)" >&2
      failed=1
    fi
  done
done
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" 'BEGIN { printf "matrix wall time: %.1f s\n", e - s }'

stop_server echo_server "$echo_pid" "$tmp/echo_server.log" || failed=1
echo_pid=""
stop_server breakerd "$breakerd_pid" "$tmp/breakerd.log" || failed=1
breakerd_pid=""
exit "$failed"
