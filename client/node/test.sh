#!/usr/bin/env bash
# Node client: install pinned dependencies, check the generated stubs and the
# proto copy are current, build (library, tests, example), run the test suite
# against a real breakerd. Needs BREAKERD_BIN (the breakerd binary).
set -euo pipefail

if [[ -z "${BREAKERD_BIN:-}" || ! -x "${BREAKERD_BIN}" ]]; then
  echo "client/node/test.sh: BREAKERD_BIN must name the breakerd binary (got '${BREAKERD_BIN:-}')" >&2
  exit 2
fi
BREAKERD_BIN="$(realpath "$BREAKERD_BIN")"
export BREAKERD_BIN
cd "$(dirname "$0")"

# No dependency needs an install script (protobufjs' only prints a warning).
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error

# The checked-in proto copy and src/generated must match what ../../proto gives now.
fresh="$(mktemp -d "${TMPDIR:-/tmp}/bd-node-generate.XXXXXX")"
trap 'rm -rf "$fresh"' EXIT
node scripts/generate.js "$fresh" >/dev/null
if ! diff -ru proto "$fresh/proto" || ! diff -ru src/generated "$fresh/src/generated"; then
  echo "client/node: proto copy or generated types are stale: run 'npm run generate' in client/node" >&2
  exit 1
fi

rm -rf dist
npm run --silent build
npm test
