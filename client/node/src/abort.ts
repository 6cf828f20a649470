// A caller giving up through an AbortSignal: racing it, and what to report.
import { Outcome, type OutcomeReport } from './outcome';

/** How a call ended from its caller's view: its value, its error, or the caller's abort. */
export type Finished<T> =
  | { ok: true; value: T }
  | { ok: false; error: unknown; aborted: boolean };

/**
 * The report for a call its caller aborted: OUTCOME_TIMEOUT when the
 * signal's reason is a TimeoutError (`AbortSignal.timeout()`: the call had
 * its time and did not finish), OUTCOME_CANCELLED for any other reason
 * (`controller.abort()`, with or without a reason): neutral for the breaker.
 */
export function abortOutcome(reason: unknown): OutcomeReport {
  return (reason as { name?: unknown } | null)?.name === 'TimeoutError' ? Outcome.TIMEOUT : Outcome.CANCELLED;
}

/**
 * Runs `fn` and settles with the first of: its value, its error, `signal`
 * aborting (then the error is the signal's reason). An error thrown while
 * the signal is aborted counts as the abort too (fetch rejects with the
 * reason). `fn` is not called if the signal is aborted already; what it
 * does after the abort is ignored.
 */
export function runAbortable<T>(fn: () => T | PromiseLike<T>, signal: AbortSignal | undefined): Promise<Finished<T>> {
  if (signal?.aborted) return Promise.resolve({ ok: false, error: signal.reason, aborted: true });
  return new Promise((resolve) => {
    const aborted = (): void => finish({ ok: false, error: signal!.reason, aborted: true });
    const finish = (f: Finished<T>): void => {
      signal?.removeEventListener('abort', aborted);
      resolve(f);
    };
    signal?.addEventListener('abort', aborted, { once: true });
    let pending: PromiseLike<T> | T;
    try {
      pending = fn();
    } catch (error) {
      pending = Promise.reject(error);
    }
    Promise.resolve(pending).then(
      (value) => finish({ ok: true, value }),
      (error) => finish(signal?.aborted ? { ok: false, error: signal.reason, aborted: true } : { ok: false, error, aborted: false }),
    );
  });
}
