#!/usr/bin/env bash
# Server reflection, read by a real reflection client nobody here wrote:
# grpcurl (from the Go module proxy). Every service breakerd lists can be
# described, and called from its reflected descriptors alone: the standard
# health check, an Acquire and a Report.
#
#   BREAKERD_BIN=/path/to/breakerd tests/tools/reflection_test.sh [tools-dir]
#
# grpcurl is taken from $GRPCURL, else PATH, else installed with
# `go install` into tools-dir (default: a folder beside BREAKERD_BIN), once.
set -euo pipefail

: "${BREAKERD_BIN:?BREAKERD_BIN must name the breakerd binary}"
tools=${1:-$(dirname "$BREAKERD_BIN")/tools-bin}
grpcurl_version=v1.9.4

grpcurl=${GRPCURL:-$(command -v grpcurl || true)}
if [[ -z $grpcurl ]]; then
  grpcurl=$tools/grpcurl
  if [[ ! -x $grpcurl ]]; then
    mkdir -p "$tools"
    echo "installing grpcurl $grpcurl_version from the Go module proxy into $tools"
    GOBIN=$(cd "$tools" && pwd) go install \
      "github.com/fullstorydev/grpcurl/cmd/grpcurl@$grpcurl_version"
  fi
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bd-reflection.XXXXXX")
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  echo "---- breakerd log ----" >&2
  cat "$work/breakerd.log" >&2 || true
  exit 1
}

"$BREAKERD_BIN" --listen=127.0.0.1:0 --metrics-listen=127.0.0.1:0 \
  > "$work/breakerd.log" 2>&1 &
pid=$!
addr=
for _ in $(seq 100); do
  addr=$(sed -n 's/.*"event":"serving","grpc":"\([^"]*\)".*/\1/p' "$work/breakerd.log")
  [[ -n $addr ]] && break
  kill -0 "$pid" 2> /dev/null || fail "breakerd exited at start"
  sleep 0.1
done
[[ -n $addr ]] || fail "breakerd did not log its address within 10 s"

call() { "$grpcurl" -plaintext -max-time 5 "$@"; }

services=$(call "$addr" list) || fail "grpcurl list"
for want in breakerd.v1.Breaker breakerd.v1.Admin grpc.health.v1.Health; do
  grep -qx "$want" <<< "$services" || fail "grpcurl list lacks $want: $services"
done

# Every listed service, and each of its methods, is described.
for service in $services; do
  described=$(call "$addr" describe "$service" 2>&1) ||
    fail "grpcurl describe $service: $described"
  grep -q "^service ${service##*.} {" <<< "$described" ||
    fail "grpcurl describe $service printed no service: $described"
  for method in $(sed -n 's/^ *rpc \([A-Za-z]*\) .*/\1/p' <<< "$described"); do
    call "$addr" describe "$service.$method" > /dev/null ||
      fail "grpcurl describe $service.$method"
  done
done
call "$addr" describe grpc.health.v1.HealthCheckResponse | grep -q SERVING ||
  fail "the health response's enum is not described"

# Called from the reflected descriptors alone.
health=$(call "$addr" grpc.health.v1.Health/Check) || fail "Health/Check"
grep -q '"status": "SERVING"' <<< "$health" || fail "Health/Check: $health"

acquired=$(call -d '{"dependency":"reflection/dep"}' "$addr" \
  breakerd.v1.Breaker/Acquire) || fail "Breaker/Acquire"
grep -q '"allowed": true' <<< "$acquired" || fail "Acquire: $acquired"
permit=$(sed -n 's/.*"permit": "\([0-9]*\)".*/\1/p' <<< "$acquired")
[[ -n $permit ]] || fail "Acquire returned no permit: $acquired"
reported=$(call -d "{\"dependency\":\"reflection/dep\",\"permit\":\"$permit\",\"outcome\":\"OUTCOME_SUCCESS\"}" \
  "$addr" breakerd.v1.Breaker/Report) || fail "Breaker/Report"
grep -q '"state": "STATE_CLOSED"' <<< "$reported" || fail "Report: $reported"

echo "PASS: $(wc -w <<< "$services") services listed, described and called through reflection ($("$grpcurl" -version 2>&1))"
