// A child process of the `local-probe` scenario (local-decisions.test.ts):
// its own client with the default options but a 2 s decision timeout (three
// processes asking at the same moment on a loaded machine would otherwise
// fail open and all call: the scenario is about who may call, not about
// breakerd's speed); once its Watch stream is up it tells the parent, it
// waits until its Watch cache holds the breaker open (an acquire refused
// LOCAL), sleeps until that refusal's retry-after has passed, and makes one
// guarded call that takes 300 ms and succeeds. It tells the parent what
// happened over the IPC channel.
//
// argv: TARGET DEPENDENCY
import { setTimeout as sleep } from 'node:timers/promises';
import { BreakerdClient, BreakerOpenError } from '../src/index';

/** What the child tells its parent. */
export type ChildMessage =
  | { type: 'ready' }
  | {
      type: 'done';
      /** The guarded call ran. */
      ran: boolean;
      /** The refusal, when it did not. */
      source?: string;
      reason?: string;
      /** Decisions granted LOCAL while the cache did not say CLOSED (must stay 0). */
      grantedLocally: number;
      /** The guarded call's decision failed open (breakerd did not answer in time). */
      failedOpen: boolean;
    }
  | { type: 'error'; message: string };

async function main(target: string, dependency: string): Promise<void> {
  const send = (m: ChildMessage): void => void process.send!(m);
  const client = new BreakerdClient({ target, decisionTimeoutMs: 2000, logger: null });
  try {
    await client.ready();
    const deadline = Date.now() + 10_000;
    while (!client.watching) {
      if (Date.now() > deadline) throw new Error('no Watch stream within 10 s');
      await sleep(5);
    }
    send({ type: 'ready' });
    let grantedLocally = 0;
    // Until the cache holds the breaker open: a LOCAL refusal.
    let refusalMs: number;
    for (;;) {
      if (Date.now() > deadline + 10_000) throw new Error('the breaker was never refused locally');
      if (client.cachedState(dependency) !== 'STATE_OPEN') {
        await sleep(2);
        continue;
      }
      const d = await client.acquire(dependency);
      if (d.allowed && d.source === 'LOCAL') grantedLocally++;
      if (!d.allowed && d.source === 'LOCAL') {
        refusalMs = d.retryAfterMs;
        break;
      }
    }
    await sleep(refusalMs + 20);
    let ran = false;
    const failOpen = client.stats().failOpen;
    const failedOpen = (): boolean => client.stats().failOpen > failOpen;
    try {
      await client.guard(dependency, async () => {
        ran = true;
        await sleep(300);
      });
      send({ type: 'done', ran, grantedLocally, failedOpen: failedOpen() });
    } catch (err) {
      if (!(err instanceof BreakerOpenError)) throw err;
      send({ type: 'done', ran, source: err.source, reason: err.reason, grantedLocally, failedOpen: failedOpen() });
    }
  } catch (err) {
    send({ type: 'error', message: String((err as Error)?.stack ?? err) });
  } finally {
    await client.close();
    process.disconnect?.();
  }
}

const [target, dependency] = process.argv.slice(2);
void main(target!, dependency!);
