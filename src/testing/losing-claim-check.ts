/**
 * The conformance check of what a losing claim answers: the record that blocks it as it stands once the
 * claim has been decided, never one read before (a `SELECT` ahead of the atomic write, a cache, a
 * snapshot taken at the start of the statement). The engine builds its answer from that record: a stale
 * in-progress record where the outcome is now stored answers a retry 409 instead of replaying it, and a
 * dead lease where a takeover now holds the key answers `Retry-After: 0` to a key that is busy for a
 * whole lease, and the wrong fingerprint's mismatch.
 * @module
 */
import assert from 'node:assert/strict';
import type { ClaimResult, IdempotencyRecord } from '../core/record.js';
import type { Store } from '../store/store.js';
import { DAY, sleep } from './check-kit.js';

/** What the check needs besides the store under test. */
export interface LosingClaimCheckContext {
  /** A unique key of the check. */
  key(label?: string): string;
  /** The suite's short lease, in ms. */
  lease: number;
}

const CONCURRENT = 10;

function describeRecord(record: IdempotencyRecord): string {
  return `${record.status} record of token ${record.token}`;
}

/** Each losing claim of `results` got the in-progress record the one winner wrote. */
function assertLosersSeeWinner(results: ClaimResult[], what: string, replaced?: number): void {
  const winners = results.filter((r) => r.claimed);
  assert.equal(winners.length, 1, `${what}: exactly one winner`);
  const winner = winners[0]!;
  for (const result of results) {
    if (result.claimed) continue;
    assert.ok(
      result.record.status === 'in_progress' && result.record.token === winner.token,
      `${what}: a losing claim got the ${describeRecord(result.record)}, not the winner's record ` +
        `(token ${winner.token})${replaced === result.record.token ? ', which the winner replaced' : ''}: ` +
        "answer a losing claim with the record as the claim's own atomic operation left it, never " +
        'with one read before it',
    );
  }
}

/**
 * Check that a losing claim gets the current record: after a completion, the completed record with its
 * outcome (not the in-progress record an earlier claim was answered with); among concurrent claims of an
 * absent key, or of a dead lease, the record the winner wrote (not the absent or dead record each read).
 */
export async function checkLosingClaim(store: Store, context: LosingClaimCheckContext) {
  const { key, lease } = context;
  const k = key('replayed');
  const first = await store.claim(k, { fingerprint: 'fp-a', leaseMs: 60_000 });
  assert.ok(first.claimed, 'a claim of a free key wins (first)');
  const blocked = await store.claim(k, { fingerprint: 'fp-a', leaseMs: 60_000 });
  assert.ok(!blocked.claimed && blocked.record.status === 'in_progress', 'a live claim blocks');
  assert.equal(await store.complete(k, first.token, Buffer.from('done'), DAY), true);
  const replay = await store.claim(k, { fingerprint: 'fp-a', leaseMs: 60_000 });
  assert.ok(!replay.claimed, 'a completed record is never claimed');
  assert.equal(
    replay.record.status,
    'completed',
    `a claim after the completion got the ${describeRecord(replay.record)}, not the completed record: ` +
      'answer a losing claim with the record as it stands, never a cached or earlier read',
  );

  const absent = key('absent');
  assertLosersSeeWinner(
    await Promise.all(
      Array.from({ length: CONCURRENT }, () =>
        store.claim(absent, { fingerprint: 'fp', leaseMs: 60_000 }),
      ),
    ),
    'concurrent claims of an absent key',
  );

  const dead = key('dead');
  const crashed = await store.claim(dead, { fingerprint: 'fp', leaseMs: lease });
  assert.ok(crashed.claimed, 'a claim of a free key wins (crashed)');
  await sleep(lease + 150);
  assertLosersSeeWinner(
    await Promise.all(
      Array.from({ length: CONCURRENT }, () =>
        store.claim(dead, { fingerprint: 'fp', leaseMs: 60_000 }),
      ),
    ),
    'concurrent takeovers of a dead lease',
    crashed.token,
  );
}
