/**
 * Model-based property test: random sequences of operations, with a manual clock, give exactly the same
 * results on the SQLite store (whose rules are written in SQL) as on a model that applies the core's pure
 * transitions (applyClaim, applyComplete, applyRelease, applyExtend) — tokens and attempts included.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
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

type Op =
  | { op: 'claim'; key: number; fingerprint: string; leaseMs: number }
  | { op: 'complete'; key: number; token: number; bytes: Uint8Array; retentionMs: number }
  | { op: 'release'; key: number; token: number }
  | { op: 'extend'; key: number; token: number; leaseMs: number }
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
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    op: fc.constant('claim' as const),
    key,
    fingerprint: fc.constantFrom('a', 'b'),
    leaseMs: ms,
  }),
  fc.record({
    op: fc.constant('complete' as const),
    key,
    token: tokenPick,
    bytes: fc.uint8Array({ maxLength: 8 }),
    retentionMs: ms,
  }),
  fc.record({ op: fc.constant('release' as const), key, token: tokenPick }),
  fc.record({ op: fc.constant('extend' as const), key, token: tokenPick, leaseMs: ms }),
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
    claim(k: string, fingerprint: string, leaseMs: number) {
      const input = { fingerprint, leaseMs, now: clock.now(), minToken: lastToken + 1 };
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
    get: live,
    delete(k: string) {
      const existed = live(k) !== undefined;
      records.delete(k);
      return existed;
    },
    purge() {
      let n = 0;
      for (const [k, r] of records) {
        if (isRecordDead(r, clock.now())) {
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

// Outcomes compare by content: the driver returns Buffers, the model keeps Uint8Arrays.
function normalise(value: unknown): unknown {
  if (value instanceof Uint8Array) return [...value];
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normalise(v)]));
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
          try {
            for (const op of ops) {
              // Act
              let actual: unknown;
              let expected: unknown;
              switch (op.op) {
                case 'claim': {
                  actual = await store.claim(`k${op.key}`, op);
                  expected = reference.claim(`k${op.key}`, op.fingerprint, op.leaseMs);
                  if ((expected as { claimed: boolean; token?: number }).claimed) {
                    latest = (expected as { token: number }).token;
                    tokens.set(`k${op.key}`, [...(tokens.get(`k${op.key}`) ?? []), latest]);
                  }
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
