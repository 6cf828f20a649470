#!/usr/bin/env python3
"""Writes bench/RESULTS.md (to stdout) from the raw files of one bench/run.

Every figure in the report comes from the files in --dir, measured in the
same run on the same machine; ratios are computed here, never typed in.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import subprocess

ENGINE_PAIR_TARGET_NS = 100.0
MEMORY_TARGET_BYTES = 1024
SCRAPE_TARGET_MS = 50.0
RPC_P50_TARGET = 1.1
RPC_P99_TARGET = 1.5


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def medians(gbench):
    """run_name -> median real time (ns, or the unit given), from Google
    Benchmark JSON; falls back to the single run when no aggregates."""
    out = {}
    if not gbench:
        return out
    for b in gbench.get("benchmarks", []):
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        out[b["run_name"]] = b
    return out


def fmt(x, digits=1):
    if x is None:
        return "—"
    if isinstance(x, (int,)) or (isinstance(x, float) and x >= 1000):
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def verdict(ok):
    return "met" if ok else "missed"


def machine():
    model = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) // 1024 // 1024} GiB"
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, {mem}, {platform.system()} {platform.release()}"


def peer_rows(peer):
    if not peer:
        return {}
    return {r["name"]: r["ns_per_op"] for r in peer.get("results", [])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--command", default="bench/run")
    ap.add_argument("--seconds", type=int, default=0)
    args = ap.parse_args()
    d = args.dir
    engine = medians(load(f"{d}/engine.json"))
    scrape = medians(load(f"{d}/scrape.json"))
    r4j = load(f"{d}/resilience4j.json")
    gob = load(f"{d}/gobreaker.json")
    instr = load(f"{d}/instructions.json")
    mem = load(f"{d}/memory.json")
    gctx = (load(f"{d}/engine.json") or {}).get("context", {})
    smoke = (r4j or {}).get("smoke") or "min_time=0.001" in args.command
    p = []
    w = p.append
    w("# breakerd benchmark results\n")
    w(f"- Date: {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC")
    w(f"- Machine: {machine()}; load average at start of the engine run: "
      f"{', '.join(f'{x:.2f}' for x in gctx.get('load_avg', []))}")
    w(f"- Command: `{args.command}` (wall time {args.seconds} s)")
    w("- Every figure below was measured in this one run; ratios are "
      "computed from them by `bench/report.py`. The machine is shared and "
      "noisy: compare ratios within the run, not absolute numbers across "
      "runs.\n")

    # --- engine ---------------------------------------------------------
    w("## Engine: Acquire+Report pair in process\n")
    w("Median of 5 repetitions. Every figure is wall time per operation as "
      "each thread sees it: Google Benchmark's real time for a multi-thread "
      "run is wall time / operations of all threads, so it is multiplied by "
      "the thread count here. Peers do the same pair on the same machine in the same run: "
      "resilience4j 2.4.0 (JMH; `registry.circuitBreaker(name)` + "
      "`tryAcquirePermission` + `onSuccess`) and sony/gobreaker v2.4.0 "
      "(`go test -bench`; map lookup + `Allow` + `done`). See "
      "`bench/peers/README.md` for their settings.\n")
    rows = [
        ("pair, 1 thread", "BM_AcquireReportPair/distinct_keys/real_time/threads:1", "pair_1thread"),
        ("pair, 2 threads, different keys", "BM_AcquireReportPair/distinct_keys/real_time/threads:2", "pair_2threads_distinct_keys"),
        ("pair, 2 threads, same key", "BM_AcquireReportPair/same_key/real_time/threads:2", "pair_2threads_same_key"),
        ("rejection while open", "BM_RejectWhileOpen", "reject_open"),
    ]
    r4 = peer_rows(r4j)
    gb = peer_rows(gob)
    w("| case | breakerd ns | resilience4j ns | gobreaker ns | breakerd / resilience4j | breakerd / gobreaker |")
    w("|---|---|---|---|---|---|")
    def per_thread(key):
        b = engine.get(key)
        return b["real_time"] * b.get("threads", 1) if b else None

    for label, key, peer_key in rows:
        ours = per_thread(key)
        a, b = r4.get(peer_key), gb.get(peer_key)
        w(f"| {label} | {fmt(ours)} | {fmt(a)} | {fmt(b)} | "
          f"{fmt(ours / a, 2) if ours and a else '—'} | "
          f"{fmt(ours / b, 2) if ours and b else '—'} |")
    one = per_thread(rows[0][1])
    two = per_thread(rows[1][1])
    w("")
    if one:
        w(f"- Target: pair at most {ENGINE_PAIR_TARGET_NS:.0f} ns on one "
          f"thread: **{verdict(one <= ENGINE_PAIR_TARGET_NS)}** "
          f"({one:.0f} ns, {one / ENGINE_PAIR_TARGET_NS:.2f}x the target).")
    if one and two:
        w(f"- Scaling, 2 threads on different keys: each thread's pair takes "
          f"{two / one:.2f}x the single-thread time (1.00 = perfectly linear).")
    if instr:
        w(f"- Instructions per pair (callgrind, `engine_pair_loop`; stable on "
          f"a noisy machine): **{instr['instructions_per_pair']}**.")
    w("")
    w("| registry lookup (Acquire) among | ns |")
    w("|---|---|")
    for n in (1, 1000, 100000):
        w(f"| {n:,} breakers | {fmt(engine.get(f'BM_LookupAmong/{n}', {}).get('real_time'))} |")
    w("")

    # --- scrape -----------------------------------------------------------
    w("## Scrape of 10k breakers\n")
    w("Each breaker has history and a latency histogram (the largest "
      "exposition).\n")
    w("| benchmark | time | notes |")
    w("|---|---|---|")
    for name in sorted(scrape):
        b = scrape[name]
        extra = ", ".join(f"{k}={fmt(v, 0)}" for k, v in b.items()
                          if k in ("bytes", "scrapes"))
        w(f"| `{name}` | {fmt(b['real_time'], 2)} {b.get('time_unit', 'ns')} | {extra} |")
    fast = [b for n, b in scrape.items() if "Exposition" in n or "Fast" in n]
    if fast:
        ms = fast[0]["real_time"] * {"ns": 1e-6, "us": 1e-3, "ms": 1, "s": 1e3}[fast[0].get("time_unit", "ns")]
        w(f"\n- Target: scrape under {SCRAPE_TARGET_MS:.0f} ms: "
          f"**{verdict(ms <= SCRAPE_TARGET_MS)}** ({ms:.1f} ms with the "
          f"/metrics writer).")
    w("")

    # --- sidecar ------------------------------------------------------------
    w("## Sidecar over gRPC against the gRPC floor\n")
    w("`bench/load/breakerd_load`, closed loop, the same tool calling an "
      "empty unary RPC on `bench/load/echo_server` (bare gRPC with "
      "breakerd's server settings: the primary floor) and "
      "grpc.health.v1/Check on breakerd itself (secondary), alternating in "
      "rounds. Client and servers share the machine's cores. Ratios: "
      "latency / floor (the pair against two floor calls); QPS ratio = "
      "QPS x RPCs per call / floor QPS.\n")
    for path in sorted(glob.glob(f"{d}/load/load_*.json")):
        L = load(path)
        if not L:
            continue
        w(f"### {L['transport']}, {L['inflight']} in flight, "
          f"{L['channels']} channel(s)\n")
        w("| call | QPS | p50 µs | p99 µs | p50 / floor | p99 / floor | QPS ratio | target |")
        w("|---|---|---|---|---|---|---|---|")
        vs = L.get("ratios", {}).get("vs_echo", {})
        for row in L["rows"]:
            r = vs.get(row["call"], {})
            tgt = ""
            if r:
                ok = r.get("p50", 9) <= RPC_P50_TARGET and r.get("p99", 9) <= RPC_P99_TARGET
                tgt = verdict(ok)
            w(f"| {row['call']} | {fmt(row['qps'])} | {fmt(row['p50_us'])} | "
              f"{fmt(row['p99_us'])} | {fmt(r.get('p50'), 2) if r else 'floor'} | "
              f"{fmt(r.get('p99'), 2) if r else ''} | {fmt(r.get('qps'), 2) if r else ''} | {tgt} |")
        w("")
    w(f"Targets: each call within {RPC_P50_TARGET}x of the floor (p50) and "
      f"p99 within {RPC_P99_TARGET}x.\n")

    # --- under abuse --------------------------------------------------------
    abuse = load(f"{d}/abuse/abuse.json")
    if abuse and abuse.get("phases"):
        w("## Acquire under abuse (bench/abuse/run.sh)\n")
        w(f"breakerd pinned to one core with {abuse['breakers']:,} breakers; "
          f"a victim keeps one Acquire in flight on its own connection for "
          f"{abuse['duration_s']:.0f} s per phase while "
          f"{abuse['abusers']} other processes (nice {abuse['abuser_nice']}, "
          f"on the other cores) loop one full-registry read as fast as "
          f"breakerd answers (issue 13). `> {abuse['deadline_ms']} ms`: "
          f"victim Acquires slower than the clients' deadline. Abuser "
          f"operations: completed / refused (RESOURCE_EXHAUSTED) / failed "
          f"otherwise. breakerd's CPU share (of its one core) and VmHWM "
          f"(peak reset at each phase start) / VmRSS at the phase end. "
          f"breakerd: {abuse.get('label') or 'unlabelled'}.\n")
        w(f"| abuse | victim Acquires | p50 ms | p99 ms | max ms | "
          f"> {abuse['deadline_ms']} ms | abuser ops ok / refused / failed | "
          f"breakerd CPU % | VmHWM / VmRSS MiB |")
        w("|---|---|---|---|---|---|---|---|---|")
        for ph in abuse["phases"]:
            v, a, b = ph["victim"], ph["abuse"], ph["breakerd"]
            ops = (f"{a['ok']:,} / {a['refused']:,} / {a['other']:,}"
                   if ph["abusers"] else "—")
            peak = (f"{b['vm_hwm_kib'] / 1024:.1f} / {b['vm_rss_kib'] / 1024:.1f}"
                    if b["vm_hwm_kib"] >= 0 else "—")
            cpu = f"{b['cpu_percent']:.0f}" if b["cpu_percent"] >= 0 else "—"
            w(f"| {ph['what']} | {v['calls']:,} | {v['p50_ms']:.2f} | "
              f"{v['p99_ms']:.2f} | {v['max_ms']:.2f} | {v['over_deadline']:,} "
              f"| {ops} | {cpu} | {peak} |")
        w("")

    # --- fleet mode ---------------------------------------------------------
    fleet = os.path.join(d, "fleet", "fleet.txt")
    if os.path.exists(fleet):
        w("## Fleet mode (bench/fleet/run.sh)\n")
        w("Two sidecars on one Redis. Propagation: from the Report that opens "
          "a breaker on A to B's Watch stream announcing it open. Then "
          "Acquire on A against the gRPC floor with Redis up, slow (a DEBUG "
          "SLEEP 0.02 loop: commands wait up to 20 ms), hung (SIGSTOP: every "
          "Redis call times out after 50 ms on the fleet thread) and dead "
          "(killed). One run, same machine.\n")
        w("```")
        w(open(fleet).read().rstrip())
        w("```\n")

    # --- memory -------------------------------------------------------------
    w("## Resident memory per breaker\n")
    if mem:
        w(f"breakerd process, VmRSS from /proc before and after creating "
          f"{mem['breakers']:,} breakers over gRPC: {mem['rss_before_kib']:,} "
          f"KiB -> {mem['rss_after_kib']:,} KiB = **{mem['bytes_per_breaker']:.0f} "
          f"bytes per breaker**; target at most {MEMORY_TARGET_BYTES}: "
          f"**{verdict(mem['bytes_per_breaker'] <= MEMORY_TARGET_BYTES)}**.\n")
    notes = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "optimizations.md")
    if os.path.exists(notes):
        w(open(notes).read())
    print("\n".join(p))


if __name__ == "__main__":
    main()
