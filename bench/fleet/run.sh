#!/usr/bin/env bash
# Fleet mode, measured (not tested): the propagation delay between two
# sidecars on one Redis, and Acquire's latency against the gRPC floor while
# Redis is up, slow (commands wait up to 20 ms), hung (SIGSTOP: every Redis
# call times out) and dead (killed).
#
#   bench/fleet/run.sh [--smoke] OUTDIR [BUILD_DIR]
#
# BUILD_DIR (default build-rel) must hold breakerd, echo_server,
# breakerd_load and fleet_propagation. Writes OUTDIR/fleet.txt.
set -euo pipefail
smoke=0
if [[ ${1:-} == --smoke ]]; then smoke=1; shift; fi
outdir=${1:?usage: run.sh [--smoke] OUTDIR [BUILD_DIR]}
build=${2:-build-rel}
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
cd "$(dirname "$0")/../.."
for b in breakerd echo_server breakerd_load fleet_propagation; do
  [[ -x $build/$b ]] || { echo "run.sh: $build/$b not built" >&2; exit 2; }
done
rounds=50 duration=1.5 load_rounds=4
((smoke)) && rounds=3 duration=0.2 load_rounds=1

tmp=$(mktemp -d /tmp/bd-fleet-bench.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
  --enable-debug-command local --dir "$tmp" >"$tmp/redis.log" 2>&1 &
redis_pid=$!
pids+=("$redis_pid")
for _ in $(seq 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.05
done

serving() {  # NAME: the grpc address from its serving line
  for _ in $(seq 200); do
    line=$(grep -m1 '"event":"serving"' "$tmp/$1.log" || true)
    if [[ -n $line ]]; then sed -n 's/.*"grpc":"\([^",]*\).*/\1/p' <<<"$line"; return; fi
    sleep 0.05
  done
  echo "run.sh: $1 did not start" >&2; cat "$tmp/$1.log" >&2; exit 1
}
metric() {  # NAME METRIC
  local m
  m=$(sed -n 's/.*"metrics":"\([^"]*\)".*/\1/p' "$tmp/$1.log" | head -1)
  curl -s "http://$m/metrics" | awk -v n="$2" '$1 == n { print $2 }'
}
for s in a b; do
  "$build/breakerd" --listen=127.0.0.1:0 --metrics-listen=127.0.0.1:0 \
    --redis="127.0.0.1:$port" >"$tmp/$s.log" 2>&1 &
  pids+=("$!")
done
"$build/echo_server" --listen=127.0.0.1:0 >"$tmp/echo_server.log" 2>&1 &
pids+=("$!")
a=$(serving a); b=$(serving b); floor=$(serving echo_server)
a_pid=${pids[1]}

{
  echo "# fleet mode: $(date -u +%FT%TZ), $(nproc) cores, redis $(redis-server --version | awk '{print $3}')"
  echo
  "$build/fleet_propagation" --a="$a" --b="$b" --rounds="$rounds"
  echo
  for condition in up slow hung dead; do
    case $condition in
      slow)
        # Redis answers, but each command may wait up to 20 ms behind a
        # DEBUG SLEEP (within the 50 ms timeout): the fleet stays connected.
        (while redis-cli -p "$port" debug sleep 0.02 >/dev/null 2>&1; do :; done) &
        slow_pid=$!
        pids+=("$slow_pid") ;;
      hung) kill "$slow_pid" 2>/dev/null || true; kill -STOP "$redis_pid" ;;
      dead) kill -CONT "$redis_pid"; sleep 1; kill -KILL "$redis_pid" ;;
    esac
    # Let the fleet thread notice (50 ms timeouts, 500 ms pings).
    sleep 1.5
    echo "## Redis $condition: breakerd_fleet_connected=$(metric a breakerd_fleet_connected)"
    "$build/breakerd_load" --target="$a" --floor="$floor" --inflight=1 \
      --calls=echo,acquire,pair,health --duration="$duration" \
      --warmup=0.2 --rounds="$load_rounds" --target_pid="$a_pid"
    echo
  done
} | tee "$outdir/fleet.txt"
