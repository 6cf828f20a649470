#!/usr/bin/env node
// bench/local for the Node client (bench/local/node/run.sh runs it): a
// guarded no-op call decided in the client (`local`), the same through
// breakerd (`rpc`), opossum doing the same (`peer`), breakerd's CPU per call
// on both paths, and the trip reaction (from the failing call that trips a
// breaker to local refusal in two clients).
//
// Usage: node bench.js OUT.json [--smoke]; needs BREAKERD_ADDR and
// BREAKERD_PID (bench/local/lib.sh's start_local_breakerd).
//
// Every call is timed on its own with process.hrtime.bigint() around one
// awaited call, the same loop for the client and for opossum. A loop of
// awaits on promises that settle at once never gives the event loop a turn
// (no timer, no I/O: the flush of local decisions could not run, as no
// I/O of an application could); so every YIELD_EVERY calls, outside the
// timed calls, both loops give it one (setImmediate), as any server does
// between requests.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { setTimeout: sleep, setImmediate: turn } = require('node:timers/promises');

const clientDist = path.resolve(__dirname, '../../../client/node/dist/src/index.js');
const { BreakerdClient, BreakerOpenError } = require(clientDist);
const CircuitBreaker = require('opossum');

const YIELD_EVERY = 256;

const args = process.argv.slice(2);
const smoke = args.includes('--smoke');
const out = args.find((a) => a !== '--smoke');
if (!out) {
  console.error('usage: node bench.js OUT.json [--smoke]');
  process.exit(2);
}
const target = process.env.BREAKERD_ADDR;
const breakerdPid = Number(process.env.BREAKERD_PID);
if (!target || !breakerdPid) {
  console.error('bench.js: BREAKERD_ADDR and BREAKERD_PID must be set (bench/local/lib.sh)');
  process.exit(2);
}

const N = smoke
  ? { local: 2000, rpc: 500, peer: 2000, warmLocal: 2000, warmRpc: 100, trips: 5 }
  : { local: 200_000, rpc: 20_000, peer: 200_000, warmLocal: 50_000, warmRpc: 2000, trips: 100 };

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** breakerd's CPU time so far (utime + stime), in ns. */
function breakerdCpuNs() {
  const stat = fs.readFileSync(`/proc/${breakerdPid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1e9) / CLK_TCK; // fields 14 and 15
}

/** The function every guard wraps: an async call that returns at once. */
const noop = async () => {};

/** Times `calls` awaited calls of `call` one by one (ns), after nothing else. */
async function timed(calls, call) {
  const ns = new Float64Array(calls);
  for (let i = 0; i < calls; i++) {
    const t0 = process.hrtime.bigint();
    await call();
    ns[i] = Number(process.hrtime.bigint() - t0);
    if (i % YIELD_EVERY === YIELD_EVERY - 1) await turn();
  }
  return ns;
}

function summary(ns) {
  const sorted = Float64Array.from(ns).sort();
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { median: Math.round(at(0.5)), p99: Math.round(at(0.99)), calls: sorted.length };
}

/** Until `client` grants `dep` in process: a two-step acquire, reported with its decision. */
async function untilLocal(client, dep) {
  const deadline = Date.now() + 5000;
  for (;;) {
    const d = await client.acquire(dep);
    await client.report(dep, d.permit, { outcome: 'OUTCOME_SUCCESS' }, 0, d);
    if (d.source === 'LOCAL' && d.allowed) return;
    if (Date.now() > deadline) throw new Error(`${dep}: no local grant within 5 s (last ${d.source})`);
    await sleep(2);
  }
}

/** Guarded no-op calls until one is refused LOCAL; when that was seen (hrtime ns). */
async function untilRefusedLocally(client, dep) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await client.guard(dep, noop);
    } catch (err) {
      if (err instanceof BreakerOpenError && err.source === 'LOCAL') return process.hrtime.bigint();
    }
    if (Date.now() > deadline) throw new Error(`${dep}: not refused locally within 10 s`);
    await turn();
  }
}

async function main() {
  const local = new BreakerdClient({ target, logger: null });
  // The rpc phase measures breakerd's answers: on a loaded machine the
  // default 20 ms decision timeout would make it measure fail-open decisions.
  const rpc = new BreakerdClient({ target, logger: null, localDecisions: false, decisionTimeoutMs: 1000 });
  await Promise.all([local.ready(), rpc.ready()]);

  // local: decided in the client.
  const localDep = 'bench/local';
  await local.guard(localDep, noop); // breakerd creates the breaker; its `created` event turns the fast path on
  await untilLocal(local, localDep);
  await timed(N.warmLocal, () => local.guard(localDep, noop));
  await sleep(100); // the warm-up's last batch lands
  let cpu0 = breakerdCpuNs();
  const localNs = await timed(N.local, () => local.guard(localDep, noop));
  await sleep(100); // the last batch lands
  const localCpu = (breakerdCpuNs() - cpu0) / N.local;
  const dropped = local.stats().droppedOutcomes;

  // rpc: every call an Acquire and a Report.
  const rpcDep = 'bench/rpc';
  await timed(N.warmRpc, () => rpc.guard(rpcDep, noop));
  cpu0 = breakerdCpuNs();
  const rpcNs = await timed(N.rpc, () => rpc.guard(rpcDep, noop));
  await sleep(50);
  const rpcCpu = (breakerdCpuNs() - cpu0) / N.rpc;
  const rpcFailOpen = rpc.stats().failOpen;

  // peer: opossum, in process, with its defaults.
  const breaker = new CircuitBreaker(noop);
  await timed(N.warmLocal, () => breaker.fire());
  const peerNs = await timed(N.peer, () => breaker.fire());
  breaker.shutdown();

  // trip reaction, on a fresh dependency per sample.
  const reactionsMs = [];
  const failing = async () => {
    throw new Error('upstream failed'); // a server error
  };
  for (let n = 0; n < N.trips; n++) {
    const dep = `trip/${n}`;
    await local.guard(dep, noop);
    await untilLocal(local, dep);
    const observer = new BreakerdClient({ target, logger: null });
    try {
      await observer.ready();
      await untilLocal(observer, dep);
      for (let i = 0; i < 5; i++) await local.guard(dep, failing).catch(() => undefined);
      const t0 = process.hrtime.bigint();
      const [a, b] = await Promise.all([untilRefusedLocally(local, dep), untilRefusedLocally(observer, dep)]);
      reactionsMs.push(Number((a > b ? a : b) - t0) / 1e6);
    } finally {
      await observer.close();
    }
  }
  await Promise.all([local.close(), rpc.close()]);

  const sortedMs = reactionsMs.sort((x, y) => x - y);
  const q = (p) => sortedMs[Math.min(sortedMs.length - 1, Math.floor(p * sortedMs.length))];
  const round2 = (x) => Math.round(x * 100) / 100;
  const result = {
    language: 'node',
    peer: `opossum ${require('opossum/package.json').version}`,
    runtime: `node${process.versions.node}`,
    guarded_call_ns: { local: summary(localNs), rpc: summary(rpcNs), peer: summary(peerNs) },
    sidecar_cpu_ns_per_call: { local: Math.round(localCpu), rpc: Math.round(rpcCpu) },
    trip_reaction_ms: { p50: round2(q(0.5)), p99: round2(q(0.99)), max: round2(sortedMs.at(-1)), samples: sortedMs.length },
  };
  fs.writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
  console.error(
    `bench.js: local median ${result.guarded_call_ns.local.median} ns (${(result.guarded_call_ns.local.median / result.guarded_call_ns.peer.median).toFixed(2)}x opossum), ` +
      `dropped outcomes ${dropped}, rpc fail-open ${rpcFailOpen}`,
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
