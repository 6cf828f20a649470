// The rate-limited change log, on an injected clock and timer: no sleeps.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CHANGE_LOG_INTERVAL_MS, ChangeLog, type LogLevel } from '../src/change-log';
import { CHANNEL_RECONNECT_BACKOFF_MS, channelOptionsFor } from '../src/client';
import { FakeTime } from './helpers';

function setup(): { time: FakeTime; log: ChangeLog; lines: { level: LogLevel; message: string }[] } {
  const time = new FakeTime();
  const lines: { level: LogLevel; message: string }[] = [];
  const log = new ChangeLog((level, message) => lines.push({ level, message }), {
    clock: time.clock,
    schedule: time.schedule,
  });
  return { time, log, lines };
}

describe('ChangeLog', () => {
  it('logs both lines of one outage at once', () => {
    const { time, log, lines } = setup();
    assert.equal(log.wrong('warn', 'unreachable'), true);
    time.advanceTo(50);
    assert.equal(log.right('info', 'back'), true);
    assert.deepEqual(lines, [
      { level: 'warn', message: 'unreachable' },
      { level: 'info', message: 'back' },
    ]);
    assert.equal(time.pending, 0, 'nothing held back');
    // A second outage well after the interval logs its lines at once too.
    time.advanceTo(CHANGE_LOG_INTERVAL_MS + 100);
    log.wrong('warn', 'unreachable 2');
    log.right('info', 'back 2');
    assert.deepEqual(lines.map((l) => l.message), ['unreachable', 'back', 'unreachable 2', 'back 2']);
  });

  it('ignores a call that changes nothing', () => {
    const { log, lines } = setup();
    assert.equal(log.right('info', 'back'), false, 'starts right');
    assert.equal(log.wrong('warn', 'unreachable'), true);
    assert.equal(log.wrong('warn', 'unreachable again'), false);
    assert.equal(log.isWrong, true);
    assert.deepEqual(lines.map((l) => l.message), ['unreachable']);
  });

  it('logs a sidecar flapping 244 times in 3 s in at most 2 lines, then one with the count', () => {
    const { time, log, lines } = setup();
    const changes = 244;
    for (let i = 0; i < changes; i++) {
      time.advanceTo((i * 3000) / changes);
      if (i % 2 === 0) assert.equal(log.wrong('warn', `unreachable #${i}`), true);
      else assert.equal(log.right('info', `back #${i}`), true);
    }
    time.advanceTo(3000);
    assert.ok(lines.length <= 2, lines.map((l) => l.message).join(' | '));
    assert.deepEqual(lines.map((l) => l.message), ['unreachable #0', 'back #1']);

    time.advanceTo(CHANGE_LOG_INTERVAL_MS + 3000);
    assert.equal(lines.length, 3, lines.map((l) => l.message).join(' | '));
    // The state it ended in (back, the 244th change), with the count of the changes not logged.
    assert.deepEqual(lines[2], {
      level: 'info',
      message: `back #${changes - 1} (${changes - 2} changes not logged since the previous line)`,
    });
    assert.equal(time.pending, 0);
  });

  // conformance: log-flap
  it('logs a sidecar flipping away and back 100 times in 1 s once per kind, then the state it ended in with the count', () => {
    const { time, log, lines } = setup();
    const flips = 100;
    for (let i = 0; i < flips; i++) {
      time.advanceTo((i * 1000) / flips);
      assert.equal(log.wrong('warn', `unreachable #${i}`), true);
      if (i === 0) assert.deepEqual(lines.map((l) => l.message), ['unreachable #0'], 'the first change is logged at once');
      time.advanceTo((i * 1000) / flips + 5);
      assert.equal(log.right('info', `back #${i}`), true);
    }
    // One line per kind: the first away and the first back; the other flips are counted.
    assert.deepEqual(lines.map((l) => l.message), ['unreachable #0', 'back #0']);
    time.advanceTo(CHANGE_LOG_INTERVAL_MS - 1);
    assert.equal(lines.length, 2, 'nothing more within the 10 s');

    time.advanceTo(CHANGE_LOG_INTERVAL_MS + 1000);
    // When the 10 s are up: the state they ended in (back), with the count of changes not logged.
    assert.deepEqual(lines.slice(2), [
      { level: 'info', message: `back #${flips - 1} (${2 * flips - 2} changes not logged since the previous line)` },
    ]);
    assert.equal(time.pending, 0);
  });

  it('logs the state held back when the interval is up, not sooner', () => {
    const { time, log, lines } = setup();
    log.wrong('warn', 'unreachable #1'); // t = 0: logged
    time.advanceTo(10);
    log.right('info', 'back #1'); // logged: the first line of its kind
    time.advanceTo(20);
    log.wrong('warn', 'unreachable #2'); // held back: the last "unreachable" was 20 ms ago
    assert.equal(lines.length, 2);

    time.advanceTo(CHANGE_LOG_INTERVAL_MS - 1);
    assert.equal(lines.length, 2, 'not before the interval is up');
    time.advanceTo(CHANGE_LOG_INTERVAL_MS);
    assert.deepEqual(lines[2], { level: 'warn', message: 'unreachable #2 (1 change not logged since the previous line)' });

    // Back again within the interval of the last "back" line? No: that was at 10 ms, so it is logged at once.
    time.advanceTo(CHANGE_LOG_INTERVAL_MS + 20);
    log.right('info', 'back #2');
    assert.deepEqual(lines[3], { level: 'info', message: 'back #2' });
    assert.equal(time.pending, 0);
  });

  it('waits for the interval of the kind the held-back changes ended in', () => {
    const { time, log, lines } = setup();
    log.wrong('warn', 'unreachable #1'); // t = 0
    time.advanceTo(5000);
    log.right('info', 'back #1'); // t = 5000: logged
    time.advanceTo(6000);
    log.wrong('warn', 'unreachable #2'); // held; the flush is due at 10000
    time.advanceTo(7000);
    log.right('info', 'back #2'); // held: the last "back" line was at 5000
    time.advanceTo(CHANGE_LOG_INTERVAL_MS);
    assert.equal(lines.length, 2, 'the "back" interval is not up until 15000');
    time.advanceTo(CHANGE_LOG_INTERVAL_MS + 5000);
    assert.deepEqual(lines[2], { level: 'info', message: 'back #2 (2 changes not logged since the previous line)' });
  });

  it('drops a held-back line once closed', () => {
    const { time, log, lines } = setup();
    log.wrong('warn', 'a');
    log.right('info', 'b');
    log.wrong('warn', 'c');
    assert.equal(time.pending, 1);
    log.close();
    assert.equal(time.pending, 0);
    time.advanceTo(60_000);
    assert.equal(lines.length, 2);
  });
});

describe('channel options', () => {
  it('cap the reconnect backoff at 1 s, whatever the Watch backoff', () => {
    assert.deepEqual(CHANNEL_RECONNECT_BACKOFF_MS, { initial: 100, max: 1000 });
    const options = channelOptionsFor();
    assert.equal(options['grpc.initial_reconnect_backoff_ms'], 100);
    assert.equal(options['grpc.max_reconnect_backoff_ms'], 1000);
    // The caller's own options still win.
    assert.equal(channelOptionsFor({ 'grpc.max_reconnect_backoff_ms': 2000 })['grpc.max_reconnect_backoff_ms'], 2000);
  });
});
