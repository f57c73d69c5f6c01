/**
 * The store contract's durations (`leaseMs`, `reserveMs`, `retentionMs`), checked the same way by every
 * built-in store before it writes anything (finite, at most 100 years), and exported from
 * `idempotency-kit` so that a third-party store refuses the same values with the same error (rule 10 of
 * docs/guides/writing-a-store.md). The engine only ever passes valid
 * ones; a store called directly (a script, a test, another engine) must refuse the others as a caller's mistake, not as an
 * outage: a negative lease would "win" a claim that is dead at once, and a NaN would reach PostgreSQL as
 * an interval error reported like a lost connection.
 * @module
 */
import { MAX_DURATION_MS } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';

// Positive for a lease or a retention (a record that is dead on arrival helps no one); a reservation may
// be 0 (none). At most MAX_DURATION_MS: a longer one would fail inside the backend, like an outage.
function assertMs(value: unknown, name: string, who: string, allowZero: boolean): void {
  if (
    typeof value !== 'number' ||
    !Number.isFinite(value) ||
    value < 0 ||
    value > MAX_DURATION_MS ||
    (value === 0 && !allowZero)
  ) {
    const what = allowZero ? 'a non-negative' : 'a positive';
    throw new InvalidOptionsError(
      `${who}: ${name} must be ${what} number of ms of at most 100 years, got ${String(value)}`,
    );
  }
}

/**
 * Check a lease (`claim`, `extend`), a retention (`complete`) or another positive duration: a positive
 * finite number of ms, at most 100 years.
 * @param who Prefix of the error message (the store's name).
 * @throws InvalidOptionsError otherwise.
 */
export function assertPositiveMs(value: unknown, name: string, who: string): void {
  assertMs(value, name, who, false);
}

/**
 * Check a reservation (`reserveMs`): a non-negative finite number of ms, at most 100 years.
 * @param who Prefix of the error message (the store's name).
 * @throws InvalidOptionsError otherwise.
 */
export function assertReserveMs(value: unknown, who: string): void {
  assertMs(value, 'reserveMs', who, true);
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
  if (options.reserveMs !== undefined) assertReserveMs(options.reserveMs, who);
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
