#!/usr/bin/env bash
# bench/local for the C++ client: local_bench.cc against a breakerd of
# bench/local/breakerd.yaml (bench/local/lib.sh). Usage: run.sh [--smoke] OUT.json
#   full:  200,000 local calls, 20,000 over RPC, 200,000 of the peer, 100 trip samples
#   smoke: 2,000 / 500 / 2,000 / 5 (checks it runs)
# The peer is breakerd's own engine in the process (breakerd::Registry:
# Acquire, the no-op, Report), built from this tree like the client, both in
# Release with link-time optimization, in $BENCH_LOCAL_CPP_BUILD (default
# build-bench-local-cpp at the tree's root; the first build takes minutes,
# later ones only what changed). breakerd: $BREAKERD_BIN (lib.sh). Writes
# OUT.json and prints it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/local/lib.sh
source "$here/../lib.sh"
parse_local_args "$@"
smoke_flag=()
((smoke)) && smoke_flag=(--smoke)

# bench/run builds local_bench in its own tree with the other benchmarks
# and names it in LOCAL_BENCH (no second build of the engine and client).
exe=${LOCAL_BENCH:-}
if [[ -z $exe ]]; then
  build=${BENCH_LOCAL_CPP_BUILD:-$root_dir/build-bench-local-cpp}
  if [[ ! -f $build/CMakeCache.txt ]]; then
    cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  cmake --build "$build" -j"${BENCH_JOBS:-1}" --target local_bench >&2
  exe=$build/local_bench
fi

bench() {
  "$exe" --addr="$BREAKERD_ADDR" --pid="$BREAKERD_PID" \
    --out="$out" "${smoke_flag[@]}"
}
run_local_bench cpp bench
