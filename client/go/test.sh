#!/usr/bin/env bash
# Runs the Go client's checks: dependencies, stub freshness, format, vet,
# build (with the example) and the test suite against a real breakerd.
#
# Usage: BREAKERD_BIN=/path/to/breakerd client/go/test.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

if [[ -z "${BREAKERD_BIN:-}" ]]; then
  echo "test.sh: BREAKERD_BIN is not set (point it at the breakerd binary)" >&2
  exit 2
fi
if [[ ! -x "$BREAKERD_BIN" ]]; then
  echo "test.sh: BREAKERD_BIN=$BREAKERD_BIN is not an executable file" >&2
  exit 2
fi
BREAKERD_BIN="$(cd "$(dirname "$BREAKERD_BIN")" && pwd)/$(basename "$BREAKERD_BIN")"
export BREAKERD_BIN

echo "== go $(go env GOVERSION): downloading modules"
go mod download
go mod verify >/dev/null

echo "== checking breakerdv1/ against the proto (./generate.sh to refresh)"
gen="$(mktemp -d /tmp/bd-go-gen.XXXXXX)"
trap 'rm -rf "$gen"' EXIT
./generate.sh "$gen"
# The protoc version line in the header may differ between machines; every
# other line (the plugin versions included) must match.
if ! diff -r -I '^//.*protoc  *v[0-9]' "$gen/breakerdv1" breakerdv1; then
  echo "test.sh: breakerdv1/ is stale: run client/go/generate.sh" >&2
  exit 1
fi

echo "== gofmt, vet, build"
unformatted="$(gofmt -l .)"
if [[ -n "$unformatted" ]]; then
  echo "test.sh: not gofmt-ed: $unformatted" >&2
  exit 1
fi
go vet ./...
go build ./...

echo "== go test"
race=()
if [[ "$(go env CGO_ENABLED)" == 1 ]] && command -v "$(go env CC)" >/dev/null; then
  race=(-race)
fi
go test "${race[@]}" -count=1 -timeout 180s -v ./...
if ((${#race[@]})); then
  # The burst scenario is about timing: the race detector slows this process
  # 5-10x and makes it, not breakerd, the late party (burst_test.go).
  echo "== go test: the burst scenario without -race"
  go test -count=1 -timeout 120s -v -run '^TestBurstOfAThousandNeverFailsOpen$' .
fi
