// Guards calls to an HTTP upstream with breakerd.
//
//   node dist/examples/guarded-call.js [BREAKERD_ADDR] [URL]
//
// Without URL it starts a local upstream that always answers 503, so the
// breaker opens after a few calls and the rest are refused without a call.
// BREAKERD_DECISION_TIMEOUT_MS overrides the 20 ms decision timeout (on a
// loaded machine decisions slower than that fail open).
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { BreakerdClient, BreakerOpenError, Outcome } from '@breakerd/client';

async function startFailingUpstream(): Promise<http.Server> {
  const server = http.createServer((_req, res) => res.writeHead(503, { 'retry-after': '1' }).end('overloaded'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

async function main(): Promise<void> {
  const target = process.argv[2] ?? process.env['BREAKERD_ADDR'] ?? '127.0.0.1:50051';
  const upstream = process.argv[3] ? undefined : await startFailingUpstream();
  const url = process.argv[3] ?? `http://127.0.0.1:${(upstream!.address() as AddressInfo).port}/`;

  const timeout = Number(process.env['BREAKERD_DECISION_TIMEOUT_MS']);
  const client = new BreakerdClient({ target, decisionTimeoutMs: timeout > 0 ? timeout : undefined });
  await client.ready().catch(() => console.log(`breakerd at ${target} is not reachable: calls fail open`));

  for (let i = 1; i <= 8; i++) {
    try {
      const res = await client.guard(
        'example/upstream',
        async () => {
          const r = await fetch(url, { signal: AbortSignal.timeout(2000) });
          return { status: r.status, retryAfter: r.headers.get('retry-after'), body: await r.text() };
        },
        // fetch resolves on any status: let the status decide the outcome.
        { classify: (s) => (s.ok ? Outcome.fromHttpStatus(s.value.status, s.value.retryAfter) : undefined) },
      );
      console.log(`call ${i}: HTTP ${res.status}`);
    } catch (err) {
      if (!(err instanceof BreakerOpenError)) {
        console.log(`call ${i}: failed: ${String(err)}`);
      } else {
        console.log(`call ${i}: not made, breaker says ${err.reason} (${err.source}, retry in ${Math.ceil(err.retryAfterMs)} ms)`);
      }
    }
  }
  console.log('client counters:', JSON.stringify(client.stats()));
  await client.close();
  upstream?.close();
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
