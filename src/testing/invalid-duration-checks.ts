/**
 * The conformance check of invalid durations (leases, reservations, retentions): a store refuses them as
 * the caller's mistake, an `InvalidOptionsError` (not a store outage, not a result), before writing
 * anything; a batch with one invalid item is refused whole.
 * @module
 */
import assert from 'node:assert/strict';
import { isInvalidOptionsError } from '../core/errors.js';
import { type CheckKit, DAY } from './check-kit.js';
import { assertInProgress } from './record-assertions.js';
import type { StoreCheck } from './suite-options.js';

/** The check that invalid durations are refused, on every call that takes one. */
export function invalidDurationChecks({ check }: CheckKit): StoreCheck[] {
  return [
    check(
      'refuses invalid durations as the caller’s mistake, writing nothing',
      async (store, key) => {
        const k = key();
        /** `call` must reject with an InvalidOptionsError (not a store outage, not a result). */
        async function refused(what: string, call: () => Promise<unknown>) {
          let error: unknown;
          try {
            await call();
          } catch (caught) {
            error = caught;
          }
          assert.ok(error !== undefined, `${what}: must reject`);
          assert.ok(
            isInvalidOptionsError(error),
            `${what}: must reject with an InvalidOptionsError, got ${String(error)}`,
          );
        }
        // 1e300 is finite but past any backend's range of times: refused up front, not failed inside.
        const badPositive = [
          0,
          -1,
          Number.NaN,
          Number.POSITIVE_INFINITY,
          1e300,
          '100' as unknown as number,
        ];
        const badReserve = [-1, Number.NaN, Number.POSITIVE_INFINITY, 1e300];
        for (const leaseMs of badPositive) {
          await refused(`claim, leaseMs ${String(leaseMs)}`, () =>
            store.claim(k, { fingerprint: 'fp', leaseMs }),
          );
        }
        for (const reserveMs of badReserve) {
          await refused(`claim, reserveMs ${reserveMs}`, () =>
            store.claim(k, { fingerprint: 'fp', leaseMs: 60_000, reserveMs }),
          );
        }
        assert.equal(await store.get(k), undefined, 'no refused claim wrote a record');
        if (store.capabilities.batch && store.claimMany && store.completeMany) {
          // A batch is refused whole: its valid item is not claimed either.
          const other = key('batch');
          await refused('claimMany with one invalid item', () =>
            store.claimMany!([
              { key: other, fingerprint: 'fp', leaseMs: 60_000 },
              { key: k, fingerprint: 'fp', leaseMs: -1 },
            ]),
          );
          assert.equal(await store.get(other), undefined, 'no item of a refused batch claimed');
        }

        const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(claim.claimed, 'a valid claim still wins');
        for (const value of badPositive) {
          await refused(`extend, leaseMs ${String(value)}`, () =>
            store.extend(k, claim.token, value),
          );
          await refused(`complete, retentionMs ${String(value)}`, () =>
            store.complete(k, claim.token, Buffer.from('x'), value),
          );
        }
        if (store.capabilities.batch && store.completeMany) {
          await refused('completeMany with an invalid retention', () =>
            store.completeMany!([
              { key: k, token: claim.token, outcome: Buffer.from('x'), retentionMs: 0 },
            ]),
          );
        }
        const record = assertInProgress(await store.get(k), 'the claim is untouched');
        assert.equal(record.token, claim.token);
        assert.equal(await store.complete(k, claim.token, Buffer.from('ok'), DAY), true);
      },
    ),
  ];
}
