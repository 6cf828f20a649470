#!/usr/bin/env bash
# Fleet mode's costs (bench/fleet/README.md): starts redis-server on a free
# loopback port and, phase by phase, the breakerd processes each phase
# needs, and runs fleet_bench:
#   commands  one sidecar, --fleet-sync-interval 250ms then 1s: Redis
#             commands/s at full call rate and at 1/10 of it (100 deps)
#   latency   Acquire against the gRPC floor (echo_server), on a sidecar
#             without --redis and on one with --redis (250ms, 100 deps busy)
#   spread    three sidecars, --fleet-sync-interval 250ms then 50ms: from
#             the last of the spread-out failures to every sidecar OPEN
# Only the phase's own sidecars are connected to Redis while it runs (Redis
# counts commands server-wide), and Redis is flushed between phases.
# Writes OUTDIR/fleet_bench_<phase>.json and .txt, and OUTDIR/fleet_bench.txt
# (every table, in order).
#
# Usage: bench/fleet/fleet_bench.sh [--smoke] OUTDIR [BREAKERD]
#   BREAKERD   the breakerd binary (or env BREAKERD; default
#              build-bench/breakerd). fleet_bench and echo_server are taken
#              from the same directory unless FLEET_BIN_DIR is set.
#   --smoke    short cells, 1 round, 2 repetitions: checks that it runs
#              (about 20 s).
#   FLEET_DURATION (10 s per commands cell), FLEET_ROUNDS (4 latency
#   rounds of 1.5 s per call), FLEET_REPS (10 spread repetitions) override
#   the full-mode settings; a full run takes about 1.5 minutes.
#   FLEET_PHASES (default "commands latency spread") runs only those.
#
# Needs redis-server (Debian's redis-server). Exits non-zero if a process
# does not start or stop cleanly, a call fails or a sidecar never opens.
# Never asserts on timing.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
parse_run_args "$root/build-bench/breakerd" "$@"
bin_dir=${FLEET_BIN_DIR:-$(dirname "$breakerd")}
bench=$bin_dir/fleet_bench
echo_server=$bin_dir/echo_server
require_executables "breakerd, echo_server and fleet_bench" \
  "$breakerd" "$bench" "$echo_server"
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  echo "run.sh: redis-server and redis-cli are needed (apt-get install" \
    "redis-server)" >&2
  exit 2
fi

if ((smoke)); then
  duration=1 warmup=0.3 rounds=1 latency_duration=0.2 reps=2
else
  duration=${FLEET_DURATION:-10} warmup=1 rounds=${FLEET_ROUNDS:-4}
  latency_duration=1.5 reps=${FLEET_REPS:-10}
fi

mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
tmp=$(mktemp -d /tmp/bdfleet.XXXXXX)
redis_pid=""
names=() pids=()  # the running servers of the current phase

stop_phase() {  # stops every server of the phase; 1 if one did not stop cleanly
  local rc=0 i
  for i in "${!pids[@]}"; do
    stop_server "${names[$i]}" "${pids[$i]}" "$tmp/${names[$i]}.log" || rc=1
  done
  names=() pids=()
  return "$rc"
}
cleanup() {
  stop_phase || true
  if [[ -n $redis_pid ]]; then
    kill -TERM "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$tmp" >"$tmp/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.05
done
redis-cli -p "$port" ping >/dev/null || {
  echo "run.sh: redis-server did not start; its log:" >&2
  cat "$tmp/redis.log" >&2
  exit 1
}
redis="127.0.0.1:$port"

# start NAME ARGS...: starts breakerd (or, for NAME echo_server, the floor)
# with ARGS; sets $addr (gRPC), $metrics and $pid.
start() {
  local name=$1 exe=$breakerd
  shift
  [[ $name == echo_server ]] && exe=$echo_server
  : >"$tmp/$name.log"
  "$exe" "$@" >>"$tmp/$name.log" 2>&1 &
  pid=$!
  names+=("$name") pids+=("$pid")
  addr=$(wait_serving "$name" "$pid" "$tmp/$name.log")
  addr=${addr%%,*}
  metrics=$(sed -n 's/.*"event":"serving".*"metrics":"\([^"]*\)".*/\1/p' \
    "$tmp/$name.log" | head -1)
}
sidecar() {  # NAME INTERVAL [ARGS...]: a fleet sidecar
  local name=$1 interval=$2
  shift 2
  start "$name" --listen=127.0.0.1:0 --metrics-listen=127.0.0.1:0 \
    --redis="$redis" --fleet-sync-interval="$interval" "$@"
}
new_phase() {  # after stop_phase: nothing of the last phase left in Redis
  redis-cli -p "$port" flushall >/dev/null
  redis-cli -p "$port" config resetstat >/dev/null
}

failed=0
run() {  # PHASE ARGS...: fleet_bench, its table to PHASE.txt and stdout
  local phase=$1 rc=0
  shift
  echo "== $phase"
  "$bench" --json="$outdir/fleet_bench_$phase.json" "$@" \
    >"$outdir/fleet_bench_$phase.txt" || rc=$?
  cat "$outdir/fleet_bench_$phase.txt"
  if ((rc != 0)); then
    echo "run.sh: $phase failed (exit $rc)" >&2
    failed=1
  fi
}

start_time=$(date +%s.%N)
echo "redis $(redis-server --version | awk '{print $3}') on $redis;" \
  "breakerd $breakerd; $(nproc) cores; uptime: $(uptime)"

phases=" ${FLEET_PHASES:-commands latency spread} "
# 1. Redis commands per sidecar against the call rate.
if [[ $phases == *" commands "* ]]; then
  for interval in 250ms 1s; do
    new_phase
    sidecar "commands-$interval" "$interval"
    run "commands_$interval" --mode=commands --target="$addr" \
      --metrics="$metrics" --redis="$redis" --sync_interval="$interval" \
      --dependencies=100 --duration="$duration" --warmup="$warmup"
    stop_phase || failed=1
  done
fi

# 2. Acquire against the floor, with and without --redis.
if [[ $phases == *" latency "* ]]; then
  new_phase
  start echo_server --listen=127.0.0.1:0
  floor=$addr floor_pid=$pid
  start local --listen=127.0.0.1:0 --metrics-listen=127.0.0.1:0
  local_addr=$addr local_pid=$pid
  sidecar fleet 250ms
  run latency --mode=latency --target="$local_addr" --target_pid="$local_pid" \
    --fleet_target="$addr" --fleet_pid="$pid" --metrics="$metrics" \
    --floor="$floor" --floor_pid="$floor_pid" --redis="$redis" \
    --sync_interval=250ms --dependencies=100 --rounds="$rounds" \
    --duration="$latency_duration" --warmup="$warmup"
  stop_phase || failed=1
fi

# 3. Spread-out failures: none of the three sees enough to open alone.
cat >"$tmp/spread.yaml" <<'EOF'
defaults:
  consecutive_failures: 0
  failure_rate: { threshold: 0.5, min_calls: 20, window: 10s }
  fleet: { quorum: 2 }
EOF
if [[ $phases == *" spread "* ]]; then
  for interval in 250ms 50ms; do
    new_phase
    addrs=() all_metrics=()
    for i in 0 1 2; do
      sidecar "spread-$interval-$i" "$interval" --config="$tmp/spread.yaml"
      addrs+=("$addr") all_metrics+=("$metrics")
    done
    run "spread_$interval" --mode=spread \
      --targets="$(IFS=,; echo "${addrs[*]}")" \
      --metrics="$(IFS=,; echo "${all_metrics[*]}")" \
      --sync_interval="$interval" --reps="$reps"
    stop_phase || failed=1
  done
fi

end_time=$(date +%s.%N)
{
  for phase in commands_250ms commands_1s latency spread_250ms spread_50ms; do
    [[ -f $outdir/fleet_bench_$phase.txt ]] && cat "$outdir/fleet_bench_$phase.txt"
    echo
  done
  awk -v s="$start_time" -v e="$end_time" \
    'BEGIN { printf "fleet_bench.sh wall time: %.0f s\n", e - s }'
} >"$outdir/fleet_bench.txt"
tail -1 "$outdir/fleet_bench.txt"
exit "$failed"
