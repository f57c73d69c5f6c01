/**
 * The store contract's durations (`leaseMs`, `reserveMs`, `retentionMs`), checked the same way by every
 * built-in store before it writes anything. The engine only ever passes valid ones; a store called
 * directly (a script, a test, another engine) must refuse the others as a caller's mistake, not as an
 * outage: a negative lease would "win" a claim that is dead at once, and a NaN would reach PostgreSQL as
 * an interval error reported like a lost connection.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';

// Positive for a lease or a retention (a record that is dead on arrival helps no one); a reservation may
// be 0 (none).
function assertMs(value: unknown, name: string, who: string, allowZero: boolean): void {
  if (
    typeof value !== 'number' ||
    !Number.isFinite(value) ||
    value < 0 ||
    (value === 0 && !allowZero)
  ) {
    const what = allowZero ? 'a non-negative' : 'a positive';
    throw new InvalidOptionsError(
      `${who}: ${name} must be ${what} number of ms, got ${String(value)}`,
    );
  }
}

/**
 * Check a lease (`claim`, `extend`) or a retention (`complete`): a positive finite number of ms.
 * @param who Prefix of the error message (the store's name).
 * @throws InvalidOptionsError otherwise.
 */
export function assertPositiveMs(
  value: unknown,
  name: 'leaseMs' | 'retentionMs',
  who: string,
): void {
  assertMs(value, name, who, false);
}

/**
 * Check a claim's durations: `leaseMs` positive, `reserveMs` absent or a non-negative finite number.
 * @param who Prefix of the error message (the store's name).
 * @throws InvalidOptionsError otherwise.
 */
export function assertClaimDurations(
  options: { leaseMs: number; reserveMs?: number },
  who: string,
): void {
  assertMs(options.leaseMs, 'leaseMs', who, false);
  if (options.reserveMs !== undefined) assertMs(options.reserveMs, 'reserveMs', who, true);
}

/**
 * Check every item of a batch before any is applied (a batch is refused whole).
 * @throws InvalidOptionsError for the first invalid item.
 */
export function assertBatchDurations(
  claims: readonly { leaseMs: number; reserveMs?: number }[],
  completions: readonly { retentionMs: number }[],
  who: string,
): void {
  for (const claim of claims) assertClaimDurations(claim, who);
  for (const completion of completions)
    assertPositiveMs(completion.retentionMs, 'retentionMs', who);
}
