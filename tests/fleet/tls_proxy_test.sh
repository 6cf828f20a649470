#!/usr/bin/env bash
# Fleet mode through TLS, the supported way: Debian's hiredis (0.14) speaks
# no TLS, so breakerd reaches a TLS-only Redis through a local TLS proxy
# (stunnel, from Debian), as README "Restarts and fleet mode" describes.
#
# A redis-server with its plain port off and a TLS port on (a certificate
# made here), stunnel in client mode verifying that certificate and its
# host name, two breakerd sidecars on the proxy: a force-open made through
# one reaches the other. A proxy that does not trust the certificate's host
# name never connects, and that sidecar stays on its own breakers.
#
#   BREAKERD_BIN=... BREAKERCTL_BIN=... tests/fleet/tls_proxy_test.sh
set -euo pipefail

: "${BREAKERD_BIN:?BREAKERD_BIN must name the breakerd binary}"
: "${BREAKERCTL_BIN:?BREAKERCTL_BIN must name the breakerctl binary}"
for tool in redis-server redis-cli stunnel openssl curl python3; do
  command -v "$tool" > /dev/null || { echo "FAIL: $tool not installed" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/bd-tls.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2> /dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  for f in "$work"/*.log; do
    echo "---- $f ----" >&2
    tail -n 30 "$f" >&2 || true
  done
  exit 1
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Polls "$@" every 0.1 s for at most 10 s.
eventually() {
  for _ in $(seq 100); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2> "$work/openssl.log" ||
  fail "openssl could not make a certificate"

tls_port=$(free_port)
redis-server --port 0 --tls-port "$tls_port" --bind 127.0.0.1 \
  --tls-cert-file "$work/cert.pem" --tls-key-file "$work/key.pem" \
  --tls-ca-cert-file "$work/cert.pem" --tls-auth-clients no \
  --save '' --appendonly no --dir "$work" > "$work/redis.log" 2>&1 &
pids+=($!)
eventually redis-cli --tls --cacert "$work/cert.pem" -p "$tls_port" PING \
  > /dev/null 2>&1 || fail "redis-server did not answer over TLS"
# Only TLS: a plaintext client gets nothing.
if redis-cli -p "$tls_port" PING 2> /dev/null | grep -q PONG; then
  fail "redis answered plaintext on its TLS port"
fi

# stunnel in client mode: plaintext on a loopback port, TLS to Redis,
# certificate and host name verified.
start_proxy() {  # name check_host -> prints the proxy's port
  local name=$1 host=$2 port
  port=$(free_port)
  cat > "$work/$name.conf" << CONF
foreground = yes
pid =
[redis]
client = yes
accept = 127.0.0.1:$port
connect = 127.0.0.1:$tls_port
CAfile = $work/cert.pem
verifyChain = yes
checkHost = $host
CONF
  stunnel "$work/$name.conf" > "$work/$name.log" 2>&1 &
  pids+=($!)
  echo "$port"
}
proxy=$(start_proxy stunnel localhost)
wrong_proxy=$(start_proxy stunnel-wrong-host redis.example)
eventually redis-cli -p "$proxy" PING > /dev/null 2>&1 ||
  fail "stunnel did not carry PING to redis"

printf 'tls-test-token-8f3b\n' > "$work/token"
chmod 600 "$work/token"

start_sidecar() {  # name redis_port
  local name=$1 port=$2
  "$BREAKERD_BIN" --listen=127.0.0.1:0 --metrics-listen=127.0.0.1:0 \
    --admin-token-file="$work/token" --redis="127.0.0.1:$port" \
    > "$work/$name.log" 2>&1 &
  pids+=($!)
  eventually grep -q '"event":"serving"' "$work/$name.log" ||
    fail "$name did not start"
}
grpc_of() {
  sed -n 's/.*"event":"serving","grpc":"\([^"]*\)".*/\1/p' "$work/$1.log"
}
metrics_of() {
  sed -n 's/.*"event":"serving".*"metrics":"\([^"]*\)".*/\1/p' "$work/$1.log"
}
fleet_connected() {  # name -> 0 if breakerd_fleet_connected is 1
  curl -sf "http://$(metrics_of "$1")/metrics" |
    grep -qx 'breakerd_fleet_connected 1'
}

start_sidecar a "$proxy"
start_sidecar b "$proxy"
start_sidecar c "$wrong_proxy"
eventually fleet_connected a || fail "sidecar a did not join through TLS"
eventually fleet_connected b || fail "sidecar b did not join through TLS"

"$BREAKERCTL_BIN" --target="$(grpc_of a)" --token-file="$work/token" \
  force-open tls/provider > "$work/ctl.log" 2>&1 || fail "force-open on a"
reaches_b() {
  "$BREAKERCTL_BIN" --target="$(grpc_of b)" get tls/provider 2> /dev/null |
    grep -qx 'state: forced_open'
}
eventually reaches_b || fail "the force-open on a did not reach b through TLS"

# The proxy that cannot verify the host name never carries a byte to Redis:
# c stays on its own breakers (and says so), and is still a breaker.
eventually grep -q '"event":"fleet_disconnected"' "$work/c.log" ||
  fail "c did not say it runs without the fleet"
fleet_connected c && fail "c joined through a proxy that checks the wrong host"
"$BREAKERCTL_BIN" --target="$(grpc_of c)" get tls/provider > /dev/null 2>&1 &&
  fail "c knows tls/provider: it heard the fleet"
grep -q 'redis.example' "$work/stunnel-wrong-host.log" ||
  grep -qi 'certificate\|verif\|host' "$work/stunnel-wrong-host.log" ||
  fail "stunnel did not log the refused host check"
echo "PASS: fleet mode through a TLS proxy (stunnel) to a TLS-only redis-server"
