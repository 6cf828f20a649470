// The Watch stream's cache: dependency -> (state, mode, generation,
// open_until), and the rule for refusing a call locally from it.
import type { RejectReasonName, StateName } from './decision';

/** One StateChange as the cache needs it. */
export interface CachedChange {
  dependency: string;
  state: StateName;
  /** "enforce" or "shadow"; "" from a breakerd older than the field (enforce). */
  mode: string;
  /** A uint64 in decimal. */
  generation: string;
  /** Cooldown left when the state is OPEN. */
  retryAfterMs: number;
}

/** A local refusal: what the Decision will say. */
export interface LocalRefusal {
  state: StateName;
  reason: RejectReasonName;
  retryAfterMs: number;
}

interface Entry {
  state: StateName;
  /** A shadow breaker never refuses: breakerd allows all its calls. */
  shadow: boolean;
  generation: bigint;
  /** `now` (performance.now() in the client) at which an OPEN entry stops refusing. */
  openUntil: number;
}

/** Breaker states as the Watch stream last told them. */
export class StateCache {
  private readonly entries = new Map<string, Entry>();

  /**
   * Records `change` at time `now` (ms, monotonic), unless the cache holds a
   * later generation of the same dependency. An equal generation is applied:
   * a reload event carries the current generation and changes only the mode.
   */
  apply(change: CachedChange, now: number): void {
    const generation = BigInt(change.generation || '0');
    const held = this.entries.get(change.dependency);
    if (held && generation < held.generation) return;
    this.entries.set(change.dependency, {
      state: change.state,
      shadow: change.mode === 'shadow',
      generation,
      openUntil: now + change.retryAfterMs,
    });
  }

  /** The cached state of a dependency, if the stream has told one. */
  state(dependency: string): StateName | undefined {
    return this.entries.get(dependency)?.state;
  }

  /**
   * A refusal while the cache says FORCED_OPEN, or OPEN with cooldown left at
   * `now`, for an enforcing breaker; undefined sends the decision to breakerd.
   */
  refusal(dependency: string, now: number): LocalRefusal | undefined {
    const entry = this.entries.get(dependency);
    if (!entry || entry.shadow) return undefined;
    if (entry.state === 'STATE_FORCED_OPEN') {
      return { state: entry.state, reason: 'REJECT_REASON_FORCED_OPEN', retryAfterMs: 0 };
    }
    if (entry.state === 'STATE_OPEN') {
      const left = entry.openUntil - now;
      if (left > 0) return { state: entry.state, reason: 'REJECT_REASON_OPEN', retryAfterMs: left };
    }
    return undefined;
  }

  /** Forgets everything (the stream ended: its next snapshot may start from lower generations). */
  clear(): void {
    this.entries.clear();
  }
}
