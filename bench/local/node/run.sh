#!/usr/bin/env bash
# bench/local for the Node client: bench.js against a breakerd of
# bench/local/breakerd.yaml. Usage: run.sh [--smoke] OUT.json
# Builds client/node if its dist/ is missing (with what its test.sh
# installs) and installs opossum, pinned in package-lock.json, once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/local/lib.sh
source "$here/../lib.sh"
parse_local_args "$@"
smoke_flag=()
((smoke)) && smoke_flag=(--smoke)

client=$root_dir/client/node
if [[ ! -f $client/dist/src/index.js ]]; then
  (cd "$client" &&
    { [[ -d node_modules ]] || npm ci --ignore-scripts --no-audit --no-fund --loglevel=error; } &&
    npm run --silent build)
fi
if [[ ! -f $here/node_modules/opossum/package.json ]]; then
  (cd "$here" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi

bench() {
  node "$here/bench.js" "$out" "${smoke_flag[@]}"
}
run_local_bench node bench
