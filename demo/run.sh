#!/usr/bin/env bash
# breakerd demo: one command starts breakerd, a flaky fake upstream, a client
# loop guarded by Acquire/Report, `breakerctl watch` and a real Prometheus.
#
#   demo/run.sh               run until Ctrl-C (or for $DEMO_SECONDS seconds)
#   demo/run.sh --scenario    scripted: make the upstream fail, wait for the
#                             breaker to open, heal it, wait for it to close;
#                             exits 0 only if both happened (a self-check)
#
# Environment:
#   DEMO_SECONDS=N     stop after N seconds (smoke test); default: until Ctrl-C
#   DEMO_RPS=N         client requests per second (default 20)
#   DEMO_PROMETHEUS=0  do not start Prometheus (default: start it if found)
#   PROMETHEUS=path    the prometheus binary (default: prometheus on PATH)
#   BUILD_DIR=dir      CMake build directory (default: <repo>/build)
#   PYTHON=python3     interpreter used to create demo/.venv
set -euo pipefail

DEMO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$DEMO_DIR/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
PYTHON=${PYTHON:-python3}
RPS=${DEMO_RPS:-20}
DEP=demo/upstream

SCENARIO=0
for arg in "$@"; do
  case "$arg" in
    --scenario) SCENARIO=1 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument: $arg (try --help)" >&2; exit 2 ;;
  esac
done

log() { printf '[demo] %s\n' "$*"; }
die() { printf '[demo] ERROR: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- build ----
find_bins() {
  BREAKERD=$BUILD_DIR/breakerd
  BREAKERCTL=$BUILD_DIR/tools/breakerctl/breakerctl
  [[ -x $BREAKERCTL ]] || BREAKERCTL=$BUILD_DIR/tools/breakerctl
  [[ -x $BREAKERD && -f $BREAKERCTL && -x $BREAKERCTL ]]
}
if ! find_bins; then
  command -v cmake >/dev/null || die "cmake not found; install it or build breakerd yourself"
  if [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
    log "configuring $BUILD_DIR"
    gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
    cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  fi
  log "building breakerd and breakerctl (first run only; takes a while)"
  cmake --build "$BUILD_DIR" -j2 --target breakerd breakerctl
  find_bins || die "build finished but breakerd/breakerctl not found under $BUILD_DIR"
fi

# --------------------------------------------------------------- python ----
VENV=$DEMO_DIR/.venv
if ! "$VENV/bin/python" -c 'import grpc, grpc_tools' 2>/dev/null; then
  log "creating $VENV with grpcio and grpcio-tools (first run only)"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check grpcio grpcio-tools
fi
PY=$VENV/bin/python

PROM=""
if [[ ${DEMO_PROMETHEUS:-1} != 0 ]]; then
  PROM=${PROMETHEUS:-$(command -v prometheus || true)}
  [[ -n $PROM ]] || log "prometheus not found: running without it (apt install prometheus)"
fi

# ---------------------------------------------------------------- start ----
TMP=$(mktemp -d "${TMPDIR:-/tmp}/breakerd-demo.XXXXXX")
PIDS=()
CLEANED=0
cleanup() {
  [[ $CLEANED == 1 ]] && return
  CLEANED=1
  trap '' INT TERM
  local pid i
  # Reverse start order: client and watchers first, breakerd last.
  for ((i=${#PIDS[@]}-1; i>=0; i--)); do
    pid=${PIDS[i]}
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'echo; log "stopping"; exit 130' INT
trap 'log "stopping"; exit 143' TERM

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# wait_for CMD... : retry for up to 15 s
wait_for() {
  for _ in $(seq 150); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}

# 1. breakerd, with short cooldowns so the demo moves quickly.
cat >"$TMP/breakerd.yaml" <<'EOF'
defaults:
  mode: enforce
  consecutive_failures: 5
  failure_rate: { threshold: 0.5, min_calls: 20, window: 10s }
  cooldown: { base: 5s, max: 30s, jitter: 0.1 }
  probe: { lease: 2s, required_successes: 1 }
EOF
"$BREAKERD" --config="$TMP/breakerd.yaml" --listen=127.0.0.1:0 \
  --metrics-listen=127.0.0.1:0 --shutdown-grace=1s 2>"$TMP/breakerd.log" &
PIDS+=($!)
BREAKERD_PID=$!
serving() { grep -m1 '"event":"serving"' "$TMP/breakerd.log"; }
wait_for serving || { cat "$TMP/breakerd.log" >&2; die "breakerd did not start"; }
line=$(serving)
GRPC=$(sed -E 's/.*"grpc":"([^"]*)".*/\1/' <<<"$line")
METRICS=$(sed -E 's/.*"metrics":"([^"]*)".*/\1/' <<<"$line")
log "breakerd (pid $BREAKERD_PID) gRPC on $GRPC, metrics on http://$METRICS/metrics"

# 2. The flaky upstream.
"$PY" "$DEMO_DIR/upstream.py" --port-file="$TMP/upstream.port" \
  --failure-rate=0.05 --latency-ms=20 &
PIDS+=($!)
wait_for test -s "$TMP/upstream.port" || die "upstream did not start"
UPSTREAM=http://127.0.0.1:$(cat "$TMP/upstream.port")
log "flaky upstream on $UPSTREAM (5% 503s, 20 ms)"

# 3. Generated stubs for the client.
mkdir -p "$TMP/stubs"
"$PY" -m grpc_tools.protoc -I "$ROOT/proto" --python_out="$TMP/stubs" \
  --grpc_python_out="$TMP/stubs" "$ROOT/proto/breakerd/v1/breaker.proto"
touch "$TMP/stubs/breakerd/__init__.py" "$TMP/stubs/breakerd/v1/__init__.py"

# 4. Prometheus, scraping breakerd every 2 s, with the alert rules.
PROM_URL=""
if [[ -n $PROM ]]; then
  PROM_PORT=$(free_port)
  {
    echo "global: { scrape_interval: 2s, evaluation_interval: 2s }"
    if [[ -f $ROOT/deploy/prometheus/breakerd-rules.yaml ]]; then
      echo "rule_files: [\"$ROOT/deploy/prometheus/breakerd-rules.yaml\"]"
    fi
    echo "scrape_configs:"
    echo "  - job_name: breakerd"
    echo "    static_configs: [ { targets: [\"$METRICS\"] } ]"
  } >"$TMP/prometheus.yml"
  "$PROM" --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/prom-data" \
    --web.listen-address="127.0.0.1:$PROM_PORT" >"$TMP/prometheus.log" 2>&1 &
  PIDS+=($!)
  PROM_URL=http://127.0.0.1:$PROM_PORT
  if wait_for curl -fsS "$PROM_URL/-/ready"; then
    log "Prometheus on $PROM_URL (scraping breakerd every 2s)"
  else
    log "Prometheus did not become ready; its log:"; tail -5 "$TMP/prometheus.log" >&2
    PROM_URL=""
  fi
fi

# 5. Transitions as they happen.
"$BREAKERCTL" --target="$GRPC" watch > >(sed -u 's/^/[watch]  /') 2>&1 &
PIDS+=($!)

# 6. The client loop.
"$PY" -u "$DEMO_DIR/client.py" --target="$GRPC" --upstream="$UPSTREAM/call" \
  --stubs="$TMP/stubs" --dependency="$DEP" --rps="$RPS" &
PIDS+=($!)
CLIENT_PID=$!

control() { curl -fsS -X POST "$UPSTREAM/control?$1" >/dev/null; }

cat <<EOF

================================================================================
 breakerd demo is running${DEMO_SECONDS:+ for ${DEMO_SECONDS}s}$([[ $SCENARIO == 1 ]] && echo " (scripted scenario)")
 Make the upstream flaky (in another terminal):
   curl -X POST '$UPSTREAM/control?failure_rate=0.8&latency_ms=200'
   curl -X POST '$UPSTREAM/control?failure_rate=0&latency_ms=20'     # heal it
   curl -X POST '$UPSTREAM/control?latency_ms=1500'                  # timeouts
 Inspect:  $BREAKERCTL --target=$GRPC list
EOF
if [[ -n $PROM_URL ]]; then cat <<EOF
 Prometheus: $PROM_URL/graph   (alerts: $PROM_URL/alerts)   queries to paste:
   breakerd_state                 (0 closed, 1 half-open, 2 open, 3/4 forced)
   sum by (decision) (rate(breakerd_acquire_total[1m]))
   rate(breakerd_transitions_total[5m])
EOF
fi
echo " Ctrl-C stops everything and removes $TMP"
echo "================================================================================"
echo

# bash's `wait` returns early on a trapped signal, so Ctrl-C is prompt.
if [[ $SCENARIO == 0 ]]; then
  if [[ -n ${DEMO_SECONDS:-} ]]; then
    end=$((SECONDS + DEMO_SECONDS))
    while ((SECONDS < end)); do
      kill -0 "$CLIENT_PID" 2>/dev/null || die "the client exited"
      sleep 1
    done
    log "DEMO_SECONDS=$DEMO_SECONDS elapsed; stopping"
  else
    wait "$CLIENT_PID" || true   # a trapped Ctrl-C ends this wait at once
    sleep 0.5
    die "the client exited"
  fi
  exit 0
fi

# ------------------------------------------------------------- scenario ----
state() {
  "$BREAKERCTL" --target="$GRPC" --json get "$DEP" 2>/dev/null |
    grep -oE '"state" *: *"?[A-Z_0-9]+' | head -1 | sed -E 's/.*"?(STATE_[A-Z_]+|[0-9]+)$/\1/' || true
}
# wait_state SECONDS REGEX
wait_state() {
  local deadline=$((SECONDS + $1)) s
  while ((SECONDS < deadline)); do
    s=$(state)
    [[ $s =~ $2 ]] && return 0
    kill -0 "$CLIENT_PID" 2>/dev/null || die "the client exited"
    sleep 0.2
  done
  return 1
}
T0=$SECONDS
sleep 10
log "scenario: t=$((SECONDS-T0))s  upstream now fails every call (failure_rate=1.0)"
control 'failure_rate=1.0'
wait_state 20 '^(STATE_OPEN|2)$' || die "scenario FAILED: the breaker never opened"
log "scenario: t=$((SECONDS-T0))s  breaker OPEN: calls are refused locally, the upstream gets no traffic"
sleep 3
log "scenario: t=$((SECONDS-T0))s  upstream healed (failure_rate=0); the breaker closes after its cooldown (~5s)"
control 'failure_rate=0'
wait_state 45 '^(STATE_CLOSED|1)$' || die "scenario FAILED: the breaker never closed"
log "scenario: t=$((SECONDS-T0))s  breaker CLOSED again after a successful probe"
sleep 2
if [[ -n $PROM_URL ]]; then
  q=$(curl -fsS "$PROM_URL/api/v1/query" --data-urlencode "query=breakerd_transitions_total" || true)
  if grep -q breakerd_transitions_total <<<"$q"; then
    log "scenario: Prometheus has scraped breakerd_transitions_total"
  else
    log "scenario: (Prometheus has no breakerd_transitions_total yet)"
  fi
fi
log "scenario PASSED in $((SECONDS-T0))s"
exit 0
