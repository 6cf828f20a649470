// The runnable example, against a real breakerd.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { Breakerd } from './helpers';

describe('examples/guarded-call', () => {
  let bd: Breakerd;
  before(async () => {
    bd = await Breakerd.start();
  });
  after(async () => {
    await bd.dispose();
  });

  it('guards calls to a failing upstream until the breaker opens', async () => {
    const script = path.join(__dirname, '..', 'examples', 'guarded-call.js');
    const { stdout } = await promisify(execFile)(process.execPath, [script, bd.grpcAddr], {
      timeout: 30_000,
      env: { ...process.env, BREAKERD_DECISION_TIMEOUT_MS: '2000' },
    });
    assert.match(stdout, /^call 1: HTTP 503$/m);
    assert.match(stdout, /^call 8: not made, breaker says REJECT_REASON_OPEN/m);
    assert.equal(await bd.reports('example/upstream', 'server_error', 'counted_failure'), 3);
  });
});
