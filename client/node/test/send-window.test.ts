// SendWindow: at most `limit` started, reports before decisions, withdraw and flush.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SendWindow, type SendJob } from '../src/send-window';

describe('SendWindow', () => {
  /** A job that logs when it is started or dropped. */
  function job(log: string[], name: string, lane: SendJob['lane'], keep = false): SendJob {
    return { lane, keep, start: () => log.push(`start ${name}`), drop: () => log.push(`drop ${name}`) };
  }

  it('starts at most `limit` jobs, then one per done(), reports first, each lane in order', () => {
    const log: string[] = [];
    const w = new SendWindow(2);
    for (const name of ['d1', 'd2', 'd3', 'd4']) w.submit(job(log, name, 'decision'));
    w.submit(job(log, 'r1', 'report'));
    assert.deepEqual(log, ['start d1', 'start d2']);
    assert.equal(w.active, 2);
    assert.equal(w.queued, 3);
    w.done();
    assert.deepEqual(log.slice(2), ['start r1']);
    w.done();
    w.done();
    assert.deepEqual(log.slice(3), ['start d3', 'start d4']);
    w.done();
    w.done();
    assert.equal(w.active, 0);
    assert.equal(w.queued, 0);
  });

  it('withdraws a queued job (never started) but not a started one', () => {
    const log: string[] = [];
    const w = new SendWindow(1);
    const started = job(log, 'a', 'decision');
    const waiting = job(log, 'b', 'decision');
    w.submit(started);
    w.submit(waiting);
    assert.equal(w.withdraw(waiting), true);
    assert.equal(w.withdraw(started), false);
    w.done();
    assert.deepEqual(log, ['start a']);
  });

  it('flush drops every queued job but those to keep, which still start', () => {
    const log: string[] = [];
    const w = new SendWindow(1);
    w.submit(job(log, 'a', 'decision'));
    w.submit(job(log, 'b', 'decision'));
    w.submit(job(log, 'r', 'report'));
    w.submit(job(log, 'late', 'report', true));
    w.flush();
    assert.deepEqual(log, ['start a', 'drop r', 'drop b']);
    w.done();
    assert.deepEqual(log.slice(3), ['start late']);
  });

  it('refuses a limit below 1', () => {
    assert.throws(() => new SendWindow(0), RangeError);
  });
});
