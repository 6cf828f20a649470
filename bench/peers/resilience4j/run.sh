#!/usr/bin/env bash
# Peer benchmark: resilience4j 2.4.0 doing breakerd's engine "pair" under JMH 1.37.
# Usage: bench/peers/resilience4j/run.sh [--smoke] OUT.json
#   full:  1 fork, 3 x 1 s warmup, 5 x 1 s measurement, modes avgt + sample, -prof gc
#          (~1.5 min after the first build)
#   smoke: in-process (-f 0), no warmup, 1 x 100 ms: only checks that it runs.
# Builds with `mvn -q -B package` (first run downloads from Maven Central into
# ~/.m2; later runs work offline), writes OUT.json (shape shared with
# bench/peers/gobreaker/run.sh). JMH's console output goes to stderr.
set -euo pipefail

# shellcheck source=../args.sh
source "$(dirname "$0")/../args.sh"

mvn -q -B package -Dstyle.color=never >&2

if [[ $smoke == 1 ]]; then
  jmh_args=(-f 0 -wi 0 -i 1 -r 100ms)
else
  jmh_args=(-f 1 -wi 3 -w 1s -i 5 -r 1s)
fi

raw=$(mktemp --suffix=.json)
trap 'rm -f "$raw"' EXIT
java -jar target/benchmarks.jar "${jmh_args[@]}" -prof gc -rf json -rff "$raw" \
  'breakerd.peers.PairBenchmark' >&2

python3 - "$raw" "$out" "$smoke" "target/benchmarks.jar" "${jmh_args[*]}" <<'EOF'
import json, statistics, sys

raw, out, smoke, jar, jmh_args = sys.argv[1:6]
data = json.load(open(raw))
by = {}
for b in data:
    by[(b["benchmark"].rsplit(".", 1)[1], b["mode"])] = b

def version():
    # The version the jar was built with: the pom's resilience4j.version property.
    import xml.etree.ElementTree as ET
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    v = ET.parse("pom.xml").getroot().find("m:properties/m:resilience4j.version", ns)
    return v.text.strip() if v is not None else "unknown"

def get(name, mode):
    b = by.get((name, mode))
    if b is None:
        sys.exit(f"missing JMH result {name} ({mode})")
    return b

AVGT_NOTE = ("JMH AverageTime, {forks} fork, {wi} warmup + {n} x {r} measurement iterations; "
             "ns_per_op = median of the {n} iteration scores (samples_ns_per_op). "
             "An iteration score is, per thread, that thread's own wall time in the "
             "iteration / its ops, averaged over the {t} thread(s) (JMH's thread "
             "aggregation for avgt) = wall time per op as each thread sees it, like "
             "Google Benchmark real_time with Threads(n). sample_p50_ns/sample_p99_ns: "
             "JMH SampleTime percentiles of single calls, which include the timer floor "
             "(timer_floor_p50_ns).")

floor = get("timer_floor", "sample")["primaryMetric"]["scorePercentiles"]

def row(name, threads, what):
    a = get(name, "avgt")
    s = get(name, "sample")
    assert a["threads"] == threads, (name, a["threads"])
    iters = [x for fork in a["primaryMetric"]["rawData"] for x in fork]
    pct = s["primaryMetric"]["scorePercentiles"]
    alloc = a["secondaryMetrics"].get("gc.alloc.rate.norm", {}).get("score")
    note = AVGT_NOTE.format(forks=a["forks"], wi=a["warmupIterations"],
                            n=len(iters), r=a["measurementTime"], t=threads)
    return {
        "name": name, "threads": threads,
        "ns_per_op": round(statistics.median(iters), 2),
        "note": what + ". " + note,
        "samples_ns_per_op": [round(x, 2) for x in iters],
        "sample_p50_ns": round(pct["50.0"], 1), "sample_p99_ns": round(pct["99.0"], 1),
        "timer_floor_p50_ns": floor["50.0"],
        "bytes_per_op": None if alloc is None else round(alloc, 1),
        "jmh_benchmark": a["benchmark"],
    }

results = [
    row("pair_1thread", 1,
        "registry.circuitBreaker(\"bench/key-0\") + tryAcquirePermission() + "
        "onSuccess(1 ms, NANOSECONDS), 1 thread"),
    row("pair_2threads_distinct_keys", 2,
        "same pair, @Threads(2), each thread its own name (@State(Scope.Thread): "
        "bench/key-0, bench/key-1), one shared registry"),
    row("pair_2threads_same_key", 2,
        "same pair, @Threads(2), both threads on \"bench/shared\""),
    row("reject_open", 1,
        "registry.circuitBreaker(\"bench/open\") + tryAcquirePermission() returning "
        "false; breaker put in FORCED_OPEN by transitionToForcedOpenState() "
        "(like breakerd's ForceOpen)"),
]
a0 = get("pair_1thread", "avgt")
doc = {
    "peer": "resilience4j",
    "version": version(),
    "runtime": f"{a0['vmName']} {a0['jdkVersion']} ({a0['vmVersion']}), JMH {a0['jmhVersion']}",
    "settings": ("CircuitBreakerRegistry.of(CircuitBreakerConfig.custom().failureRateThreshold(50)"
                 ".slidingWindowType(TIME_BASED).slidingWindowSize(30).minimumNumberOfCalls(20)"
                 ".waitDurationInOpenState(30s).permittedNumberOfCallsInHalfOpenState(1)) "
                 "- breakerd's failure_rate/cooldown defaults; other settings are resilience4j "
                 "defaults (sliding window synchronization SYNCHRONIZED, slow-call rule "
                 "100% at 60 s); no consecutive-failures rule exists in resilience4j. "
                 "Registry lookup = registry.circuitBreaker(name) (ConcurrentHashMap-backed "
                 "get-or-create). JVM flags: JMH/JVM defaults."),
    "command": "java -jar target/benchmarks.jar " + jmh_args +
               " -prof gc -rf json -rff RAW.json breakerd.peers.PairBenchmark",
    "smoke": smoke == "1",
    "results": results,
    "extra_results": [],
}
with open(out, "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
print(f"wrote {out}", file=sys.stderr)
EOF
