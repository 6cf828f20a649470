#!/usr/bin/env bash
# bench/local for the Java client: app/ (LocalBench) against a breakerd of
# bench/local/breakerd.yaml. Usage: run.sh [--smoke] OUT.json
#   full:  200,000 local calls, 20,000 RPC calls, 200,000 resilience4j calls
#          (each after as many warm-up calls), 100 trip samples
#   smoke: 2,000 / 500 / 2,000 and 5 samples: only checks that it runs.
# Builds client/java and the benchmark in one Maven reactor (pom.xml; the
# first run downloads resilience4j 2.4.0, pinned as in bench/peers/resilience4j,
# from Maven Central into ~/.m2; later runs work offline) unless the jar is
# up to date, then runs app/target/local-bench.jar (BREAKERD_ADDR, BREAKERD_PID
# and CLK_TCK in its environment) and prints OUT.json. Each figure is in ns
# per call (median and p99 of single calls), breakerd's CPU in ns per call, the
# trip reaction in ms; more percentiles and the client's counters go to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/local/lib.sh
source "$here/../lib.sh"
parse_local_args "$@"
smoke_flag=()
((smoke)) && smoke_flag=(--smoke)

jar=$here/app/target/local-bench.jar
# Built again only when a source (the client's, the proto, the benchmark's)
# is newer than the jar.
if [[ ! -f $jar || -n $(find "$here/pom.xml" "$here/app/pom.xml" "$here/app/src" \
      "$root_dir/client/java/pom.xml" "$root_dir/client/java/src/main" "$root_dir/proto" \
      -newer "$jar" -print -quit) ]]; then
  mvn_args=(-q -B -Dstyle.color=never -Dmaven.test.skip=true)
  if [[ -n "${BREAKERD_M2_REPO:-}" ]]; then
    mvn_args+=(-Dmaven.repo.local="$BREAKERD_M2_REPO")
  fi
  # Maven 3.8 writes stray colour resets even in batch mode; drop them.
  (cd "$here" && mvn "${mvn_args[@]}" package) 2>&1 | sed -u 's/\x1b\[[0-9;]*m//g' >&2
fi

bench() {
  CLK_TCK=$(getconf CLK_TCK) java -jar "$jar" "${smoke_flag[@]}" "$out"
}
run_local_bench java bench
