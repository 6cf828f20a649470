// The Watch stream's cache: dependency -> (state, mode, generation,
// open_until, local_decisions), and the rules for deciding a call locally
// from it: a refusal while open, a grant while closed with local decisions on.
import type { RejectReasonName, StateName } from './decision';
import type { Tally } from './local-batch';

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
  /** breakerd lets clients decide first attempts themselves after this event. */
  localDecisions: boolean;
  /** Why: a transition's reason, or a notice ("created", "evicted", "reload", "ramp_done"). */
  reason: string;
}

/** A local refusal: what the Decision will say. */
export interface LocalRefusal {
  state: StateName;
  reason: RejectReasonName;
  retryAfterMs: number;
}

/**
 * What the cache holds for one dependency. Replaced, never changed, by each
 * event applied, except `tally`, which the client attaches to it.
 */
export interface CacheEntry {
  readonly state: StateName;
  /** A shadow breaker never refuses: breakerd allows all its calls. */
  readonly shadow: boolean;
  readonly generation: bigint;
  /** `now` (performance.now() in the client) at which an OPEN entry stops refusing. */
  readonly openUntil: number;
  /** CLOSED, enforcing, and breakerd said local decisions are on: a first attempt may be granted here. */
  readonly grantable: boolean;
  /**
   * The books of the grants made on this entry's generation, attached by the
   * client at its first grant; kept when an event of the same generation
   * replaces the entry.
   */
  tally: Tally | undefined;
}

/** Breaker states as the Watch stream last told them. */
export class StateCache {
  private readonly entries = new Map<string, CacheEntry>();

  /**
   * Records `change` at time `now` (ms, monotonic), unless the cache holds a
   * later generation of the same dependency. An equal generation is applied:
   * a `reload` or `ramp_done` notice carries the current generation and
   * changes only the mode or local_decisions. An `evicted` notice forgets
   * the dependency (its next breaker starts above this generation).
   */
  apply(change: CachedChange, now: number): void {
    const generation = BigInt(change.generation || '0');
    const held = this.entries.get(change.dependency);
    if (held && generation < held.generation) return;
    if (change.reason === 'evicted') {
      this.entries.delete(change.dependency);
      return;
    }
    const shadow = change.mode === 'shadow';
    this.entries.set(change.dependency, {
      state: change.state,
      shadow,
      generation,
      openUntil: now + change.retryAfterMs,
      grantable: change.localDecisions && change.state === 'STATE_CLOSED' && !shadow,
      tally: held && held.generation === generation ? held.tally : undefined,
    });
  }

  /** The entry of a dependency, if the stream has told one. */
  entry(dependency: string): CacheEntry | undefined {
    return this.entries.get(dependency);
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
    return entry && refusalOf(entry, now);
  }

  /** Forgets everything (the stream ended: its next snapshot may start from lower generations). */
  clear(): void {
    this.entries.clear();
  }
}

/** StateCache.refusal for an entry already looked up. */
export function refusalOf(entry: CacheEntry, now: number): LocalRefusal | undefined {
  if (entry.shadow) return undefined;
  if (entry.state === 'STATE_FORCED_OPEN') {
    return { state: entry.state, reason: 'REJECT_REASON_FORCED_OPEN', retryAfterMs: 0 };
  }
  if (entry.state === 'STATE_OPEN') {
    const left = entry.openUntil - now;
    if (left > 0) return { state: entry.state, reason: 'REJECT_REASON_OPEN', retryAfterMs: left };
  }
  return undefined;
}
