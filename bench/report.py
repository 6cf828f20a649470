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
LOCAL_MEDIAN_TARGET_NS = 5000.0
LOCAL_PEER_RATIO_TARGET = 2.0
LOCAL_CPU_RATIO_TARGET = 10.0
TRIP_REACTION_P99_TARGET_MS = 20.0
LOCAL_LANGUAGES = ("cpp", "go", "java", "node", "python")


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


def local_section(d):
    """Local decisions per client language (bench/local/<lang>/run.sh)."""
    runs = [(lang, load(f"{d}/local/{lang}.json")) for lang in LOCAL_LANGUAGES]
    runs = [(lang, r) for lang, r in runs if r]
    if not runs:
        return []
    p = []
    w = p.append
    w("## Local decisions: a guarded call per client language\n")
    w("`bench/local/<language>/run.sh`, each against its own breakerd "
      "(`bench/local/breakerd.yaml`), in this run. A guarded no-op call "
      "(the client's guard helper around a function that returns at once), "
      "each call timed alone: with local decisions (granted in the client, "
      "outcome batched), through the sidecar (two RPCs: `local_decisions` "
      "off), and the in-process peer of that language doing the same guarded "
      "no-op (for C++: breakerd's own engine pair). Sidecar CPU: breakerd's "
      "utime+stime over each phase / calls. Trip reaction: from the return of "
      "the fifth failing call (which trips the breaker) to the first local "
      "refusal in each of two clients of the process, the later of the two; "
      "one sample per fresh dependency.\n")
    w("| language | local median / p99 ns | sidecar path median / p99 ns | "
      "peer | peer median / p99 ns | local / peer (median) | "
      "sidecar CPU ns per call, local / RPC | trip reaction p50 / p99 / max ms "
      "(samples) |")
    w("|---|---|---|---|---|---|---|---|")
    verdicts = []
    for lang, r in runs:
        g = r.get("guarded_call_ns", {})
        loc, rpc, peer = g.get("local", {}), g.get("rpc", {}), g.get("peer", {})
        cpu = r.get("sidecar_cpu_ns_per_call", {})
        trip = r.get("trip_reaction_ms", {})
        ratio = (loc.get("median") / peer["median"]
                 if loc.get("median") and peer.get("median") else None)
        cpu_ratio = None
        if cpu.get("rpc") and cpu.get("local") is not None:
            # 0: less than one clock tick over the whole local phase.
            cpu_ratio = (cpu["rpc"] / cpu["local"] if cpu["local"]
                         else float("inf"))
        w(f"| {lang} ({r.get('runtime', '')}) | {fmt(loc.get('median'))} / "
          f"{fmt(loc.get('p99'))} | {fmt(rpc.get('median'))} / "
          f"{fmt(rpc.get('p99'))} | {r.get('peer', '')} | "
          f"{fmt(peer.get('median'))} / {fmt(peer.get('p99'))} | "
          f"{fmt(ratio, 2)} | {fmt(cpu.get('local'))} / {fmt(cpu.get('rpc'))} "
          f"| {fmt(trip.get('p50'))} / {fmt(trip.get('p99'))} / "
          f"{fmt(trip.get('max'))} ({trip.get('samples', 0)}) |")
        verdicts.append((lang, loc.get("median"), ratio, cpu_ratio,
                         trip.get("p99")))
    w("")
    for lang, median, ratio, cpu_ratio, trip in verdicts:
        parts = []
        if median is not None:
            parts.append(f"median at most {LOCAL_MEDIAN_TARGET_NS / 1000:.0f} "
                         f"µs: **{verdict(median <= LOCAL_MEDIAN_TARGET_NS)}**")
        if ratio is not None:
            parts.append(f"at most {LOCAL_PEER_RATIO_TARGET:.0f}x the peer: "
                         f"**{verdict(ratio <= LOCAL_PEER_RATIO_TARGET)}** "
                         f"({ratio:.2f}x)")
        if cpu_ratio is not None:
            parts.append(f"sidecar CPU at least {LOCAL_CPU_RATIO_TARGET:.0f}x "
                         f"below the RPC path: "
                         f"**{verdict(cpu_ratio >= LOCAL_CPU_RATIO_TARGET)}** "
                         f"({cpu_ratio:.0f}x)")
        if trip is not None:
            parts.append(f"trip reaction p99 at most "
                         f"{TRIP_REACTION_P99_TARGET_MS:.0f} ms: "
                         f"**{verdict(trip <= TRIP_REACTION_P99_TARGET_MS)}**")
        w(f"- {lang}: " + "; ".join(parts) + ".")
    w("")
    return p


def fleet_bench_section(d):
    """The "Fleet mode: evidence sync" section from DIR/fleet_bench/*.json
    (bench/fleet/fleet_bench.sh); [] if that step did not run."""
    fb = os.path.join(d, "fleet_bench")
    commands = [load(p) for p in sorted(glob.glob(f"{fb}/fleet_bench_commands_*.json"))]
    commands = sorted([c for c in commands if c], key=lambda c: c["sync_interval_s"])
    latency = load(f"{fb}/fleet_bench_latency.json")
    spread = [load(p) for p in sorted(glob.glob(f"{fb}/fleet_bench_spread_*.json"))]
    spread = sorted([s for s in spread if s], key=lambda s: -s["sync_interval_s"])
    if not (commands or latency or spread):
        return []
    p = []
    w = p.append
    w("## Fleet mode: evidence sync (bench/fleet/fleet_bench.sh)\n")
    w("A real redis-server on a loopback port and real breakerd processes, "
      "only the measured phase's sidecars connected to it (Redis counts "
      "commands server-wide). See `bench/fleet/README.md` for what each "
      "figure is. Load: `/proc/loadavg` (1, 5, 15 min) at the start and "
      "end of each figure, on a shared 2-core machine.\n")
    if commands:
        deps = commands[0]["dependencies"]
        w(f"### Redis commands per sidecar, {deps} active dependencies\n")
        w(f"One sidecar; Acquire + Report SUCCESS round-robin over "
          f"`dep-000`..`dep-{deps - 1:03d}`, first as fast as "
          f"{commands[0]['threads']} closed loops go, then paced to 1/10 of "
          f"that; INFO commandstats and "
          f"`breakerd_fleet_events_total{{event=\"window_sync\"}}` before "
          f"and after each cell. Sent: commands the sidecar sent (EVALSHA "
          f"window syncs, EVAL heartbeats); inside scripts: what Redis ran "
          f"within them (INFO counts those too). Bound: (dependencies + 1 "
          f"heartbeat) / sync interval.\n")
        w("| sync interval | call rate | pairs/s | sent/s | EVALSHA/s | EVAL/s "
          "| bound/s | sent / bound | syncs/s (period) | EVALSHA per sync "
          "| inside scripts/s | Redis CPU % | load |")
        w("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for c in commands:
            for cell in c["cells"]:
                period = (f" ({1000 / cell['window_syncs_per_s']:.0f} ms)"
                          if cell["window_syncs_per_s"] > 0 else "")
                w(f"| {c['sync_interval']} | {cell['rate']} | "
                  f"{cell['pairs_per_s']:,.0f} | {cell['sent_per_s']:.1f} | "
                  f"{cell['evalsha_per_s']:.1f} | {cell['eval_per_s']:.1f} | "
                  f"{c['bound_per_s']:.0f} | {cell['sent_per_s'] / c['bound_per_s']:.2f} | "
                  f"{cell['window_syncs_per_s']:.2f}{period} | "
                  f"{cell['evalsha_per_sync']:.1f} | "
                  f"{cell['in_scripts_per_s']:,.0f} | "
                  f"{cell['redis_cpu_percent']:.1f} | "
                  f"{cell['loadavg_before']} -> {cell['loadavg_after']} |")
        w("")
        ok = all(cell["sent_per_s"] <= c["bound_per_s"] * 1.02
                 for c in commands for cell in c["cells"])
        w(f"- Target: commands per sidecar bounded by active dependencies / "
          f"sync interval, whatever the call rate: **{verdict(ok)}**.")
        for c in commands:
            cells = c["cells"]
            if len(cells) == 2 and cells[1]["pairs_per_s"] > 0:
                w(f"- {c['sync_interval']}: call rate x"
                  f"{cells[0]['pairs_per_s'] / cells[1]['pairs_per_s']:.1f}, "
                  f"commands sent x"
                  f"{cells[0]['sent_per_s'] / max(cells[1]['sent_per_s'], 1e-9):.2f}.")
        slow = [(c["sync_interval"], 1000 / cell["window_syncs_per_s"])
                for c in commands for cell in c["cells"][:1]
                if cell["window_syncs_per_s"] > 0 and
                1 / cell["window_syncs_per_s"] > 1.1 * c["sync_interval_s"]]
        if slow:
            w("- The measured sync period is longer than the interval ("
              + ", ".join(f"{i}: {ms:.0f} ms" for i, ms in slow)
              + "): fewer commands than the bound, and a later fleet open; "
              "see `bench/fleet/README.md`, \"Findings\".")
        w("")
    if latency:
        w("### Acquire against the gRPC floor, fleet sync on and off\n")
        w(f"`fleet_bench --mode=latency`: bench/load's closed-loop driver, "
          f"1 in flight, 1 channel per server, {latency['rounds']} ABBA "
          f"rounds of {latency['duration_s']:.1f} s per call: the echo floor "
          f"(`bench/load/echo_server`), grpc.health.v1 Check and Acquire on "
          f"a sidecar without `--redis`, Acquire on a sidecar with "
          f"`--redis --fleet-sync-interval={latency['sync_interval']}`. Both "
          f"sidecars get {latency['background_pairs_per_s']:.0f} pairs/s "
          f"over {latency['dependencies']} dependencies all along, so the "
          f"fleet one flushed {latency['evalsha_per_s']:.0f} EVALSHA/s "
          f"({latency['window_syncs_per_s']:.2f} syncs/s) during the run. "
          f"Load {latency['loadavg_before']} -> "
          f"{latency['loadavg_after']}.\n")
        rows = latency["rows"]
        floor = rows[0]
        nofleet = next((r for r in rows if r["call"].endswith("no --redis")), None)
        w("| call | QPS | p50 µs | p99 µs | server CPU µs/call | p50 / floor "
          "| p99 / floor | p50 / no --redis | p99 / no --redis |")
        w("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            vs_floor = r is not floor
            vs_local = r["call"].endswith(", --redis")
            w(f"| {r['call']} | {fmt(r['qps'])} | {fmt(r['p50_us'])} | "
              f"{fmt(r['p99_us'])} | {r['server_cpu_us_per_call']:.1f} | "
              f"{fmt(r['p50_us'] / floor['p50_us'], 2) if vs_floor else 'floor'} | "
              f"{fmt(r['p99_us'] / floor['p99_us'], 2) if vs_floor else ''} | "
              f"{fmt(r['p50_us'] / nofleet['p50_us'], 2) if vs_local and nofleet else ''} | "
              f"{fmt(r['p99_us'] / nofleet['p99_us'], 2) if vs_local and nofleet else ''} |")
        fleet_row = next((r for r in rows if r["call"].endswith(", --redis")), None)
        if fleet_row and nofleet:
            per_round = sorted(a / b for a, b in zip(fleet_row["round_p50_us"],
                                                      nofleet["round_p50_us"]) if b)
            ok = (fleet_row["p50_us"] / floor["p50_us"] <= RPC_P50_TARGET and
                  fleet_row["p99_us"] / floor["p99_us"] <= RPC_P99_TARGET)
            w("")
            w(f"- Target: Acquire with sync on within {RPC_P50_TARGET}x of the "
              f"floor (p50; p99 within {RPC_P99_TARGET}x): **{verdict(ok)}**.")
            if per_round:
                w(f"- Acquire with / without `--redis`, p50 per round: "
                  f"{per_round[0]:.2f}..{per_round[len(per_round) // 2]:.2f}.."
                  f"{per_round[-1]:.2f} (min..median..max).")
        w("")
    if spread:
        w("### Spread-out failures: the last failing call to every sidecar open\n")
        w("Three sidecars, policy `consecutive_failures: 0, failure_rate "
          "{ threshold: 0.5, min_calls: 20, window: 10s }, fleet { quorum: 2 }`. "
          "For each fresh dependency every sidecar gets 8 calls, 3 successes "
          "then 5 OUTCOME_TIMEOUT (none reaches min_calls alone; the fleet "
          "window has 24 calls, 15 failures, 3 sources); then GetState on "
          "all three every 5 ms. Time from sending the last failing Report "
          "to seeing the last sidecar OPEN.\n")
        w("| sync interval | dependencies | min ms | median ms | max ms | "
          "samples ms | load |")
        w("|---|---|---|---|---|---|---|")
        for s in spread:
            w(f"| {s['sync_interval']} | {len(s['samples_ms'])} | "
              f"{s['min_ms']:.1f} | {s['median_ms']:.1f} | {s['max_ms']:.1f} | "
              f"{' '.join(f'{x:.0f}' for x in s['samples_ms'])} | "
              f"{s['loadavg_before']} -> {s['loadavg_after']} |")
        w("")
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--command", default="bench/run")
    ap.add_argument("--seconds", type=int, default=0)
    ap.add_argument("--only-local", action="store_true",
                    help="print only the local decisions section (--dir "
                    "holds local/<language>.json), to write "
                    "bench/local/RESULTS.md after running bench/local alone")
    ap.add_argument("--only-fleet-bench", action="store_true",
                    help="print only the fleet_bench section (--dir holds "
                    "fleet_bench/), to update RESULTS.md after running "
                    "bench/fleet/fleet_bench.sh alone")
    args = ap.parse_args()
    d = args.dir
    if args.only_fleet_bench:
        print("\n".join(fleet_bench_section(d)))
        return
    if args.only_local:
        print(f"# Local decisions, one run\n\n- Date: "
              f"{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC\n- Machine: "
              f"{machine()}\n- Command: `{args.command}`\n")
        print("\n".join(local_section(d)))
        return
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
    p.extend(fleet_bench_section(d))
    p.extend(local_section(d))

    # --- memory -------------------------------------------------------------
    w("## Resident memory per breaker\n")
    if mem and mem.get("settle_seconds"):
        # The target is for idle breakers: a breaker's permit ledger is
        # freed once its last permit is past the 60 s horizon.
        w(f"breakerd process, VmRSS from /proc before and after creating "
          f"{mem['breakers']:,} breakers over gRPC (one Acquire and one "
          f"Report each): {mem['rss_before_kib']:,} KiB -> "
          f"{mem['rss_after_kib']:,} KiB = {mem['bytes_per_breaker']:.0f} "
          f"bytes per breaker while each has a permit within the horizon "
          f"(its permit ledger allocated); {mem['settle_seconds']} s later, "
          f"idle (ledgers freed by the eviction pass, heap trimmed): "
          f"{mem['rss_idle_kib']:,} KiB = **{mem['idle_bytes_per_breaker']:.0f} "
          f"bytes per idle breaker**; target at most {MEMORY_TARGET_BYTES}: "
          f"**{verdict(mem['idle_bytes_per_breaker'] <= MEMORY_TARGET_BYTES)}**.\n")
    elif mem:
        w(f"breakerd process, VmRSS from /proc before and after creating "
          f"{mem['breakers']:,} breakers over gRPC: {mem['rss_before_kib']:,} "
          f"KiB -> {mem['rss_after_kib']:,} KiB = **{mem['bytes_per_breaker']:.0f} "
          f"bytes per breaker**, each with its permit ledger (not settled: "
          f"--smoke); target (idle) at most {MEMORY_TARGET_BYTES}.\n")
    notes = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "optimizations.md")
    if os.path.exists(notes):
        w(open(notes).read())
    print("\n".join(p))


if __name__ == "__main__":
    main()
