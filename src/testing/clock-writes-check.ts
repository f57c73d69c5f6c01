/**
 * The second half of the conformance check of rule 2 ("the store's clock"), for a store that judges time
 * by its backend's clock: every time it **writes** comes from that clock too, not only the lease of a
 * claim. A store that compares `lease_until > now()` on the server but writes `lease_until = $1 + leaseMs`,
 * `expires_at` or `reserved_until` from the application's `Date.now()` passes every check made with the
 * process's clock ahead (its writes then only last longer); on a server whose clock runs behind, its
 * extensions end leases at once (another attempt takes over while the holder runs), its completions keep
 * no outcome (the retry executes again) and its reservations end before the lease does.
 * @module
 */
import assert from 'node:assert/strict';
import type { Store } from '../store/store.js';
import { sleep } from './check-kit.js';
import { CLOCK_SHIFT_MS, withProcessClockMoved } from './clock-check.js';

/** What the check needs besides the store under test. */
export interface ClockWritesCheckContext {
  /** A unique key of the check. */
  key(label?: string): string;
  /** The suite's short lease, in ms. */
  lease: number;
}

const MINUTE = 60_000;

/**
 * Check that `store` (`storeClock: 'backend'`) writes the lease of `extend`, the retention of `complete`
 * and the reservation of `claim` by its backend's clock: made with the process's clock
 * {@link CLOCK_SHIFT_MS} behind, each still lasts as long as it was asked to by the real time.
 */
export async function checkClockWrites(
  store: Store,
  context: ClockWritesCheckContext,
): Promise<void> {
  const { key, lease } = context;
  const behind = <T>(call: () => Promise<T>) => withProcessClockMoved(-CLOCK_SHIFT_MS, call);
  const minutes = `${CLOCK_SHIFT_MS / MINUTE} minutes`;
  const rule =
    "write every time with the backend's clock (now() + interval in SQL, TIME in Redis), never from " +
    'Date.now() passed by the application';

  const extended = key('clock-extend');
  const held = await store.claim(extended, { fingerprint: 'fp-a', leaseMs: MINUTE });
  assert.ok(held.claimed, 'a claim of a free key wins (held)');
  assert.equal(
    await behind(() => store.extend(extended, held.token, MINUTE)),
    true,
    `the holder of a live lease could not extend it while the process's clock ran ${minutes} behind`,
  );
  const taken = await store.claim(extended, { fingerprint: 'fp-b', leaseMs: MINUTE });
  assert.equal(
    taken.claimed,
    false,
    `a lease extended by a minute while the process's clock ran ${minutes} behind was taken over at ` +
      `once: ${rule}`,
  );

  const done = key('clock-complete');
  const completed = await store.claim(done, { fingerprint: 'fp-a', leaseMs: MINUTE });
  assert.ok(completed.claimed, 'a claim of a free key wins (completed)');
  assert.equal(
    await behind(() => store.complete(done, completed.token, Buffer.from('ok'), MINUTE)),
    true,
    `the holder of a live lease could not complete while the process's clock ran ${minutes} behind`,
  );
  assert.equal(
    (await store.get(done))?.status,
    'completed',
    `an outcome kept for a minute, completed while the process's clock ran ${minutes} behind, was gone ` +
      `at once: ${rule}`,
  );

  const reserved = key('clock-reserve');
  const crashed = await behind(() =>
    store.claim(reserved, { fingerprint: 'fp-a', leaseMs: lease, reserveMs: MINUTE }),
  );
  assert.ok(crashed.claimed, 'a claim of a free key wins (crashed)');
  await sleep(lease + 150);
  const other = await store.claim(reserved, { fingerprint: 'fp-b', leaseMs: MINUTE });
  assert.equal(
    other.claimed,
    false,
    `a key reserved for a minute by a claim made while the process's clock ran ${minutes} behind went ` +
      `to another request once the lease ended: ${rule}`,
  );
}
