#!/usr/bin/env bash
# Peer benchmark: sony/gobreaker v2.4.0 doing breakerd's engine "pair".
# Usage: bench/peers/gobreaker/run.sh [--smoke] OUT.json
#   full:  go test -run xxx -bench . -benchtime 1s -count 5 -cpu 1,2   (~1.5 min)
#   smoke: go test -run xxx -bench . -benchtime 1000x -count 1 -cpu 1,2 (checks it runs)
# Writes OUT.json (shape shared with bench/peers/resilience4j/run.sh) and the raw
# `go test` output to stderr.
set -euo pipefail

# shellcheck source=../args.sh
source "$(dirname "$0")/../args.sh"
export GOTOOLCHAIN=local
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false"

if [[ $smoke == 1 ]]; then
  args=(-benchtime 1000x -count 1)
else
  args=(-benchtime 1s -count 5)
fi

raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
go test -run xxx -bench . "${args[@]}" -cpu 1,2 | tee "$raw" >&2

runtime=$(go version | awk '{print $3" "$4}')
version=$(go list -m -f '{{.Version}}' github.com/sony/gobreaker/v2)

python3 - "$raw" "$out" "$runtime" "$version" "$smoke" <<'EOF'
import json, re, statistics, sys

raw, out, runtime, version, smoke = sys.argv[1:6]
samples = {}  # (name, procs) -> [ns/op, ...]
line_re = re.compile(r"^(Benchmark\S+?)(?:-(\d+))?\s+(\d+)\s+([0-9.]+) ns/op"
                     r"(?:\s+([0-9.]+) B/op)?")
alloc = {}  # (name, procs) -> [B/op, ...]
for line in open(raw):
    m = line_re.match(line)
    if m:
        key = (m.group(1), int(m.group(2) or 1))
        samples.setdefault(key, []).append(float(m.group(4)))
        if m.group(5):
            alloc.setdefault(key, []).append(float(m.group(5)))

def row(name, bench, procs, threads, note):
    s = samples.get((bench, procs))
    if not s:
        sys.exit(f"missing benchmark {bench} at -cpu {procs} in go test output")
    med = statistics.median(s)
    per_thread = [x * threads for x in s]
    r = {"name": name, "threads": threads,
         "ns_per_op": round(med * threads, 2),
         "note": note.format(n=len(s), med=round(med, 2)),
         "samples_ns_per_op": [round(x, 2) for x in per_thread],
         "bytes_per_op": (statistics.median(alloc[(bench, procs)])
                          if alloc.get((bench, procs)) else None),
         "go_benchmark": f"{bench}" + (f"-{procs}" if procs != 1 else "")}
    return r

one = ("median of {n} go test runs (-count) of ns/op from a plain b.N loop "
       "on 1 goroutine (-cpu 1); ns/op = wall / ops")
par = ("b.RunParallel with -cpu 2 (2 goroutines share b.N; go reports "
       "ns/op = wall / total ops = {med} ns median of {n} runs); "
       "ns_per_op = 2 x that = wall time per op as each goroutine sees it "
       "(same meaning as Google Benchmark real_time with Threads(2))")
results = [
    row("pair_1thread", "BenchmarkPair", 1, 1,
        one + "; registry = map behind sync.RWMutex (RLock on the hot path)"),
    row("pair_2threads_distinct_keys", "BenchmarkPairParallel/distinct_keys", 2, 2,
        par + "; keys bench/key-0 and bench/key-1; registry = map behind sync.RWMutex"),
    row("pair_2threads_same_key", "BenchmarkPairParallel/same_key", 2, 2,
        par + "; both goroutines use bench/shared; registry = map behind sync.RWMutex"),
    row("reject_open", "BenchmarkRejectOpen", 1, 1,
        one + "; lookup + Allow() returning ErrOpenState after 5 failures tripped it "
        "(gobreaker has no force-open)"),
]
extra = [
    row("pair_2threads_distinct_keys_syncmap",
        "BenchmarkPairParallel/distinct_keys_syncmap", 2, 2,
        par + "; registry = sync.Map (lock-free reads, like a ConcurrentHashMap)"),
]
doc = {
    "peer": "gobreaker",
    "version": version,
    "runtime": runtime,
    "settings": ("gobreaker.TwoStepCircuitBreaker[any] per name in a registry "
                 "(map[string]*TwoStepCircuitBreaker behind sync.RWMutex, get-or-create); "
                 "Settings{MaxRequests: 1, Interval: 30s, BucketPeriod: 3s (rolling window of 10 buckets), "
                 "Timeout: 30s, ReadyToTrip: ConsecutiveFailures >= 5 || "
                 "(Requests >= 20 && TotalFailures/Requests >= 0.5)}; pair = lookup + Allow() + done(nil); "
                 "Allow allocates its done closure (48 B, 1 alloc/op)"),
    "command": "go test -run xxx -bench . " +
               ("-benchtime 1000x -count 1" if smoke == "1" else "-benchtime 1s -count 5") +
               " -cpu 1,2",
    "smoke": smoke == "1",
    "results": results,
    "extra_results": extra,
}
with open(out, "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
print(f"wrote {out}", file=sys.stderr)
EOF
