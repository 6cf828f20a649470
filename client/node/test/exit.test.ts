// The Watch stream does not keep a process alive on its own.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Breakerd } from './helpers';

describe('process lifetime', () => {
  let bd: Breakerd;
  before(async () => {
    bd = await Breakerd.start();
  });
  after(async () => {
    await bd.dispose();
  });

  it('lets the process exit while the watch stream is open, without close()', async () => {
    const index = path.join(__dirname, '..', 'src', 'index.js');
    const script = `
      const { BreakerdClient } = require(${JSON.stringify(index)});
      const client = new BreakerdClient({ target: ${JSON.stringify(bd.grpcAddr)}, decisionTimeoutMs: 2000, logger: null });
      const poll = setInterval(async () => {
        if (!client.watching) return;
        clearInterval(poll);
        const d = await client.acquire('exit/a');
        console.log('watching', d.source);
      }, 10);`;
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
    assert.match(out, /watching SIDECAR/);
  });
});
