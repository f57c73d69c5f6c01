/**
 * Model-based property test: random sequences of operations, with a manual clock, give exactly the same
 * results on the SQLite store (whose rules are written in SQL) as on a model that applies the core's pure
 * transitions (applyClaim, applyComplete, applyRelease, applyExtend, applySaveStep, stepsHeldBy) — tokens
 * and attempts included, reservations (reserveMs) of claims made one by one or in batches, and the steps
 * recorded on a claim (kept or dropped by every takeover, completion, release and purge).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { applySaveStep, isRecordGone, stepsHeldBy } from '../../../src/core/record.js';
import {
  applyClaim,
  applyComplete,
  applyExtend,
  applyRelease,
  type IdempotencyRecord,
  isRecordDead,
} from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite/index.js';
import { ManualClock } from '../../helpers/clock.js';

interface ClaimOp {
  key: number;
  fingerprint: string;
  leaseMs: number;
  reserveMs: number | undefined;
}

type Op =
  | ({ op: 'claim' } & ClaimOp)
  | { op: 'claimMany'; claims: ClaimOp[] }
  | { op: 'completeAndClaimMany'; complete: Extract<Op, { op: 'complete' }>; claims: ClaimOp[] }
  | { op: 'complete'; key: number; token: number; bytes: Uint8Array; retentionMs: number }
  | { op: 'release'; key: number; token: number }
  | { op: 'extend'; key: number; token: number; leaseMs: number }
  | { op: 'saveStep'; key: number; token: number; name: string; bytes: Uint8Array }
  | { op: 'loadSteps'; key: number; token: number }
  | { op: 'get'; key: number }
  | { op: 'delete'; key: number }
  | { op: 'purge' }
  | { op: 'stats' }
  | { op: 'advance'; ms: number };

const key = fc.integer({ min: 0, max: 3 });
// Which token a fenced call presents: 0 the key's latest, 1 the key's previous one (a zombie), 2 the latest
// issued for any key, 3 one never issued.
const tokenPick = fc.integer({ min: 0, max: 3 });
const ms = fc.constantFrom(1, 10, 50, 100);
// No reservation, one not above the lease (reserves nothing), or one that outlasts some leases.
const reserveMs = fc.constantFrom(undefined, 0, 50, 150, 300);
const claimArb: fc.Arbitrary<ClaimOp> = fc.record({
  key,
  fingerprint: fc.constantFrom('a', 'b'),
  leaseMs: ms,
  reserveMs,
});
const completeArb = fc.record({
  op: fc.constant('complete' as const),
  key,
  token: tokenPick,
  bytes: fc.uint8Array({ maxLength: 8 }),
  retentionMs: ms,
});
const opArb: fc.Arbitrary<Op> = fc.oneof(
  claimArb.map((claim) => ({ op: 'claim' as const, ...claim })),
  fc.record({
    op: fc.constant('claimMany' as const),
    claims: fc.array(claimArb, { minLength: 1, maxLength: 3 }),
  }),
  fc.record({
    op: fc.constant('completeAndClaimMany' as const),
    complete: completeArb,
    claims: fc.array(claimArb, { minLength: 1, maxLength: 3 }),
  }),
  completeArb,
  fc.record({ op: fc.constant('release' as const), key, token: tokenPick }),
  fc.record({ op: fc.constant('extend' as const), key, token: tokenPick, leaseMs: ms }),
  // Steps weigh more: what they test (kept or dropped by a takeover) needs a save, a takeover and a load
  // in a row on one key.
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('saveStep' as const),
      key,
      token: tokenPick,
      // Few names, so that saves replace each other; one with the characters a JSON path would split on.
      name: fc.constantFrom('charge', 'ship.v2:eu-1_x'),
      bytes: fc.uint8Array({ maxLength: 8 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ op: fc.constant('loadSteps' as const), key, token: tokenPick }),
  },
  fc.record({ op: fc.constant('get' as const), key }),
  fc.record({ op: fc.constant('delete' as const), key }),
  fc.record({ op: fc.constant('purge' as const) }),
  fc.record({ op: fc.constant('stats' as const) }),
  fc.record({ op: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 120 }) }),
);

/** The reference: a map of records driven by the core's pure transitions, dead rows kept until purged. */
function model(clock: ManualClock) {
  const records = new Map<string, IdempotencyRecord>();
  let lastToken = 0;
  const live = (k: string) => {
    const r = records.get(k);
    return r !== undefined && !isRecordDead(r, clock.now()) ? r : undefined;
  };
  const set = (k: string, next: IdempotencyRecord | undefined) =>
    next === undefined ? records.delete(k) : records.set(k, next);
  return {
    claim(k: string, fingerprint: string, leaseMs: number, reserveMs: number | undefined) {
      const input = { fingerprint, leaseMs, reserveMs, now: clock.now(), minToken: lastToken + 1 };
      const { result, next } = applyClaim(records.get(k), input);
      if (result.claimed) {
        lastToken = result.token;
        set(k, next);
      }
      return result;
    },
    complete(k: string, token: number, outcome: Uint8Array, retentionMs: number) {
      const { ok, next } = applyComplete(records.get(k), {
        token,
        outcome,
        retentionMs,
        now: clock.now(),
      });
      if (ok) set(k, next);
      return ok;
    },
    release(k: string, token: number) {
      const { ok, next } = applyRelease(records.get(k), { token, now: clock.now() });
      if (ok) set(k, next);
      return ok;
    },
    extend(k: string, token: number, leaseMs: number) {
      const { ok, next } = applyExtend(records.get(k), { token, leaseMs, now: clock.now() });
      if (ok) set(k, next);
      return ok;
    },
    saveStep(k: string, token: number, name: string, value: Uint8Array) {
      const { ok, next } = applySaveStep(records.get(k), { token, name, value, now: clock.now() });
      if (ok) set(k, next);
      return ok;
    },
    loadSteps(k: string, token: number) {
      return stepsHeldBy(records.get(k), token, clock.now());
    },
    get: live,
    delete(k: string) {
      const existed = live(k) !== undefined;
      records.delete(k);
      return existed;
    },
    purge() {
      let n = 0;
      for (const [k, r] of records) {
        if (isRecordGone(r, clock.now())) {
          records.delete(k);
          n++;
        }
      }
      return n;
    },
    stats() {
      const now = clock.now();
      const s = {
        inProgress: 0,
        completed: 0,
        staleLeases: 0,
        oldestLeaseAgeMs: null as number | null,
      };
      for (const r of records.values()) {
        if (r.status === 'completed') {
          if (r.expiresAt > now) s.completed++;
        } else if (r.leaseUntil <= now) s.staleLeases++;
        else {
          s.inProgress++;
          s.oldestLeaseAgeMs = Math.max(s.oldestLeaseAgeMs ?? 0, now - r.createdAt);
        }
      }
      return s;
    },
  };
}

// Outcomes compare by content: the driver returns Buffers, the model keeps Uint8Arrays. A store need not
// report a record's reservation (reservedUntil) nor its steps on the records it returns: their effects
// (claims refused, loadSteps) are compared instead.
function normalise(value: unknown): unknown {
  if (value instanceof Uint8Array) return [...value];
  if (Array.isArray(value)) return value.map(normalise);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([k]) => k !== 'reservedUntil' && k !== 'steps')
      .map(([k, v]) => [k, normalise(v)]),
  );
}

describe('sqlite store against the core transitions', () => {
  it('gives the same results, tokens and attempts as the pure model for any operation sequence', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb, { minLength: 20, maxLength: 80, size: 'max' }),
        async (ops) => {
          // Arrange
          const clock = new ManualClock();
          const store = sqliteStore({ database: ':memory:', clock });
          const reference = model(clock);
          const tokens = new Map<string, number[]>();
          let latest = 12345;
          const token = (k: string, pick: number) => {
            const own = tokens.get(k) ?? [];
            const chosen =
              pick === 0 ? own.at(-1) : pick === 1 ? own.at(-2) : pick === 2 ? latest : 12345;
            return chosen ?? 12345;
          };
          const request = (claim: ClaimOp) => ({
            key: `k${claim.key}`,
            fingerprint: claim.fingerprint,
            leaseMs: claim.leaseMs,
            reserveMs: claim.reserveMs,
          });
          const expectClaim = (claim: ClaimOp) => {
            const { key: k, fingerprint, leaseMs, reserveMs } = request(claim);
            const result = reference.claim(k, fingerprint, leaseMs, reserveMs);
            if (result.claimed) {
              latest = result.token;
              tokens.set(k, [...(tokens.get(k) ?? []), latest]);
            }
            return result;
          };
          try {
            for (const op of ops) {
              // Act
              let actual: unknown;
              let expected: unknown;
              switch (op.op) {
                case 'claim': {
                  const { key: k, ...claimOptions } = request(op);
                  actual = await store.claim(k, claimOptions);
                  expected = expectClaim(op);
                  break;
                }
                case 'claimMany':
                  actual = await store.claimMany(op.claims.map(request));
                  expected = op.claims.map(expectClaim);
                  break;
                case 'completeAndClaimMany': {
                  const { complete: c } = op;
                  const completion = {
                    key: `k${c.key}`,
                    token: token(`k${c.key}`, c.token),
                    outcome: c.bytes,
                    retentionMs: c.retentionMs,
                  };
                  actual = await store.completeAndClaimMany([completion], op.claims.map(request));
                  expected = {
                    completed: [
                      reference.complete(
                        completion.key,
                        completion.token,
                        completion.outcome,
                        completion.retentionMs,
                      ),
                    ],
                    claimed: op.claims.map(expectClaim),
                  };
                  break;
                }
                case 'complete':
                  actual = await store.complete(
                    `k${op.key}`,
                    token(`k${op.key}`, op.token),
                    op.bytes,
                    op.retentionMs,
                  );
                  expected = reference.complete(
                    `k${op.key}`,
                    token(`k${op.key}`, op.token),
                    op.bytes,
                    op.retentionMs,
                  );
                  break;
                case 'release':
                  actual = await store.release(`k${op.key}`, token(`k${op.key}`, op.token));
                  expected = reference.release(`k${op.key}`, token(`k${op.key}`, op.token));
                  break;
                case 'extend':
                  actual = await store.extend(
                    `k${op.key}`,
                    token(`k${op.key}`, op.token),
                    op.leaseMs,
                  );
                  expected = reference.extend(
                    `k${op.key}`,
                    token(`k${op.key}`, op.token),
                    op.leaseMs,
                  );
                  break;
                case 'saveStep':
                  actual = await store.saveStep(
                    `k${op.key}`,
                    token(`k${op.key}`, op.token),
                    op.name,
                    op.bytes,
                  );
                  expected = reference.saveStep(
                    `k${op.key}`,
                    token(`k${op.key}`, op.token),
                    op.name,
                    op.bytes,
                  );
                  break;
                case 'loadSteps':
                  actual = await store.loadSteps(`k${op.key}`, token(`k${op.key}`, op.token));
                  expected = reference.loadSteps(`k${op.key}`, token(`k${op.key}`, op.token));
                  break;
                case 'get':
                  actual = await store.get(`k${op.key}`);
                  expected = reference.get(`k${op.key}`);
                  break;
                case 'delete':
                  actual = await store.delete(`k${op.key}`);
                  expected = reference.delete(`k${op.key}`);
                  break;
                case 'purge':
                  actual = await store.purgeExpired({ limit: 1000 });
                  expected = reference.purge();
                  break;
                case 'stats':
                  actual = await store.stats();
                  expected = reference.stats();
                  break;
                case 'advance':
                  clock.advance(op.ms);
                  continue;
              }
              // Assert
              expect(normalise(actual), JSON.stringify(op)).toEqual(normalise(expected));
            }
          } finally {
            await store.close();
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
