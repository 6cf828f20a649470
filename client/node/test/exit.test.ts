// Neither the Watch stream, nor the away probe, nor the flush of local
// decisions keeps a process alive on its own.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Breakerd, freePort } from './helpers';

describe('process lifetime', () => {
  let bd: Breakerd;
  before(async () => {
    bd = await Breakerd.start();
  });
  after(async () => {
    await bd.dispose();
  });

  /** Runs `script` in a fresh node; fails if it has to be killed. Returns its stdout. */
  async function runToExit(script: string): Promise<string> {
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    const [code, signal] = await new Promise<[number | null, string | null]>((resolve) =>
      child.on('exit', (c, s) => resolve([c, s])),
    );
    clearTimeout(timer);
    assert.equal(signal, null, 'the process had to be killed: something kept it alive');
    assert.equal(code, 0);
    return out;
  }

  const index = path.join(__dirname, '..', 'src', 'index.js');

  it('lets the process exit while the watch stream is open, without close()', async () => {
    const script = `
      const { BreakerdClient } = require(${JSON.stringify(index)});
      const client = new BreakerdClient({ target: ${JSON.stringify(bd.grpcAddr)}, decisionTimeoutMs: 2000, logger: null });
      const poll = setInterval(async () => {
        if (!client.watching) return;
        clearInterval(poll);
        const d = await client.acquire('exit/a');
        console.log('watching', d.source);
      }, 10);`;
    assert.match(await runToExit(script), /watching SIDECAR/);
  });

  it('lets the process exit with local decisions still to send, without close()', async () => {
    // local/* allows local decisions: the last outcomes wait for the flush timer, which is unref()ed.
    const script = `
      const { BreakerdClient } = require(${JSON.stringify(index)});
      const client = new BreakerdClient({ target: ${JSON.stringify(bd.grpcAddr)}, decisionTimeoutMs: 2000, logger: null });
      const poll = setInterval(async () => {
        if (!client.watching) return;
        clearInterval(poll);
        await client.guard('local/exit', async () => {});
        for (;;) {
          const d = await client.acquire('local/exit');
          await client.report(d.dependency, d.permit, { outcome: 'OUTCOME_SUCCESS' }, 1, d);
          if (d.source === 'LOCAL') break;
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        for (let i = 0; i < 10; i++) await client.guard('local/exit', async () => {});
        console.log('granted locally');
      }, 10);`;
    assert.match(await runToExit(script), /granted/);
  });

  it('lets the process exit while breakerd is away and probed, without close()', async () => {
    // A loopback port nothing listens on: every RPC fails UNAVAILABLE.
    const port = await freePort();
    const script = `
      const { BreakerdClient } = require(${JSON.stringify(index)});
      const client = new BreakerdClient({ target: '127.0.0.1:${port}', decisionTimeoutMs: 2000, logger: null });
      (async () => {
        const first = await client.acquire('exit/away');
        const second = await client.acquire('exit/away');
        console.log('away', first.source, second.source, client.stats().awayDecisions);
      })();`;
    assert.match(await runToExit(script), /away FAIL_OPEN FAIL_OPEN 1/);
  });
});
