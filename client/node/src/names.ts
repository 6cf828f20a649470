// breakerd's name rule, checked before a name is sent where breakerd would
// refuse it (server/engine/dependency_name.h).

/** The characters a name may use, as breakerd's errors write them. */
export const NAME_ALPHABET = '[A-Za-z0-9._:/@-]';
/** The longest name breakerd takes. */
export const MAX_NAME_LENGTH = 200;

/** The highest tier of a chain (tiers are 0..MAX_CHAIN_TIER). */
export const MAX_CHAIN_TIER = 63;

const NAME = /^[A-Za-z0-9._:/@-]{1,200}$/;

/** Whether `name` is a name breakerd takes. */
export function isName(name: unknown): name is string {
  return typeof name === 'string' && NAME.test(name);
}

/**
 * Returns `name`, the value of `field`, if it is 1-200 characters of
 * NAME_ALPHABET; else throws a RangeError naming `field`.
 */
export function checkName(name: unknown, field: string): string {
  if (isName(name)) return name;
  const shown = typeof name === 'string' ? `'${name}'` : String(name);
  throw new RangeError(`${field}: ${shown} must be 1-${MAX_NAME_LENGTH} characters of ${NAME_ALPHABET}`);
}
