#!/usr/bin/env bash
# Acquire under abuse (issue 13): starts breakerd on a free loopback port,
# pinned to one core, and runs abuse_bench pinned to the other core(s):
# 10,000 breakers, then a victim's Acquire latency with no abuser, and with
# two abuser processes looping Watch(all)+cancel, Watch(all) read whole, and
# ListStates. Writes OUTDIR/abuse.json and OUTDIR/abuse.txt (the table).
#
# Usage: bench/abuse/run.sh [--smoke] OUTDIR [BREAKERD]
#   BREAKERD   the breakerd binary (or env BREAKERD; default
#              build-bench/breakerd). abuse_bench is taken from the same
#              directory unless ABUSE_BIN_DIR is set.
#   --smoke    1 s phases (0.2 s warmup): checks that it works.
#   ABUSE_DURATION, ABUSE_WARMUP (seconds per phase: 10 and 1),
#   ABUSE_ABUSERS (2), ABUSE_BREAKERS (10000) override the settings;
#   ABUSE_SERVER_CPU (0) and ABUSE_CLIENT_CPUS (the rest) the pinning;
#   ABUSE_BREAKERD_ARGS adds breakerd flags; ABUSE_LABEL names the build
#   in the results.
#
# Exits non-zero if breakerd does not start or stop cleanly, a victim call
# fails or an abuser does not run. Never asserts on timing.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
parse_run_args "$root/build-bench/breakerd" "$@"
bench=${ABUSE_BIN_DIR:-$(dirname "$breakerd")}/abuse_bench
require_executables "breakerd and abuse_bench" "$breakerd" "$bench"

if ((smoke)); then
  duration=1 warmup=0.2
else
  duration=${ABUSE_DURATION:-10} warmup=${ABUSE_WARMUP:-1}
fi
abusers=${ABUSE_ABUSERS:-2}
breakers=${ABUSE_BREAKERS:-10000}

# breakerd alone on one core, as in the issue; the victim and the abusers
# on the others. With a single core there is nothing to separate.
cores=$(nproc)
server_pin=() client_pin=()
if ((cores >= 2)); then
  server_cpu=${ABUSE_SERVER_CPU:-0}
  client_cpus=${ABUSE_CLIENT_CPUS:-$(seq -s, 0 $((cores - 1)) |
    tr , '\n' | grep -vx "$server_cpu" | paste -sd,)}
  server_pin=(taskset -c "$server_cpu")
  client_pin=(taskset -c "$client_cpus")
else
  echo "run.sh: one core: breakerd and the clients are not separated" >&2
fi

mkdir -p "$outdir"
tmp=$(mktemp -d /tmp/bdabuse.XXXXXX)
breakerd_pid=""

stop_breakerd() {  # once: clears breakerd_pid, so cleanup's call does nothing
  local pid=$breakerd_pid
  breakerd_pid=""
  stop_server breakerd "$pid" "$tmp/breakerd.log"
}
cleanup() {
  stop_breakerd || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# Room for every breaker plus the victim's; none evicted during the run.
echo "limits: { max_breakers: $((breakers + 1000)), idle_ttl: 1h }" \
  >"$tmp/config.yaml"
# shellcheck disable=SC2086  # ABUSE_BREAKERD_ARGS is a list of flags
"${server_pin[@]}" "$breakerd" --config="$tmp/config.yaml" \
  --listen=127.0.0.1:0 --metrics-listen=127.0.0.1:0 \
  ${ABUSE_BREAKERD_ARGS:-} >"$tmp/breakerd.log" 2>&1 &
breakerd_pid=$!
addrs=$(wait_serving breakerd "$breakerd_pid" "$tmp/breakerd.log")
target=${addrs%%,*}

# Which breakerd, for the record: ABUSE_LABEL, or the binary's path and,
# for a binary built in this checkout, the state of the checkout now (which
# may have moved on since the build).
label=${ABUSE_LABEL:-$breakerd}
if [[ -z ${ABUSE_LABEL:-} && $(realpath "$breakerd") == "$root"/* ]] &&
  head=$(git -C "$root" log -1 --format=%h 2>/dev/null); then
  dirty=$(git -C "$root" status --porcelain -- server 2>/dev/null | wc -l)
  label+=" (checkout at $head$( ((dirty == 0)) || echo ", server/ modified"))"
fi
echo "breakerd: $target (pid $breakerd_pid, cpu ${server_cpu:-any}); $label"

rc=0
"${client_pin[@]}" "$bench" --target="$target" \
  --breakerd_pid="$breakerd_pid" --breakers="$breakers" \
  --abusers="$abusers" --duration="$duration" --warmup="$warmup" \
  --label="$label" --json="$outdir/abuse.json" >"$outdir/abuse.txt" || rc=$?
cat "$outdir/abuse.txt"
if ((rc != 0)); then
  echo "run.sh: abuse_bench failed (exit $rc)" >&2
fi
stop_breakerd || rc=1
exit "$rc"
