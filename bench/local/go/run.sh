#!/usr/bin/env bash
# bench/local for the Go client: main.go against a breakerd of
# bench/local/breakerd.yaml (bench/local/lib.sh). Usage: run.sh [--smoke] OUT.json
#   full:  200,000 local calls, 20,000 over RPC, 200,000 of gobreaker, 100 trip samples
#   smoke: 2,000 / 500 / 2,000 / 5 (checks it runs)
# The client comes from client/go (a replace directive); gobreaker is pinned
# in go.mod at bench/peers/gobreaker's version. Writes OUT.json and prints it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/local/lib.sh
source "$here/../lib.sh"
parse_local_args "$@"
smoke_flag=()
((smoke)) && smoke_flag=(-smoke)
export GOTOOLCHAIN=local
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false"

bin=$(mktemp "${TMPDIR:-/tmp}/bench-local-go-bin.XXXXXX")
trap 'rm -f "$bin"' EXIT
(cd "$here" && go build -o "$bin" .)
bench() {
  "$bin" -addr "$BREAKERD_ADDR" -metrics "$BREAKERD_METRICS" -pid "$BREAKERD_PID" \
    -clk-tck "$(getconf CLK_TCK)" -out "$out" "${smoke_flag[@]}"
}
run_local_bench go bench
rm -f "$bin"
