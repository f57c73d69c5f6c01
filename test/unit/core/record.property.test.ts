import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { memoryStore } from '../../../src/index.js';
import { ManualClock } from '../../helpers/clock.js';

type Op =
  | { kind: 'claim'; leaseMs: number; fingerprint: string; reserveMs: number | undefined }
  | { kind: 'complete'; holder: number; retentionMs: number }
  | { kind: 'release'; holder: number }
  | { kind: 'extend'; holder: number; leaseMs: number }
  | { kind: 'advance'; ms: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('claim' as const),
    leaseMs: fc.integer({ min: 1, max: 500 }),
    fingerprint: fc.constantFrom('a', 'b'),
    reserveMs: fc.option(fc.integer({ min: 1, max: 1500 }), { nil: undefined }),
  }),
  fc.record({
    kind: fc.constant('complete' as const),
    holder: fc.nat(),
    retentionMs: fc.integer({ min: 1, max: 500 }),
  }),
  fc.record({ kind: fc.constant('release' as const), holder: fc.nat() }),
  fc.record({
    kind: fc.constant('extend' as const),
    holder: fc.nat(),
    leaseMs: fc.integer({ min: 1, max: 500 }),
  }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 400 }) }),
);

describe('the record state machine (memory store, random histories)', () => {
  it('keeps its invariants: one live holder, growing tokens, completed records immutable, reservations', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 60 }), async (ops) => {
        const clock = new ManualClock();
        const store = memoryStore({ clock });
        const tokens: number[] = []; // every token ever granted, in order
        let completed: { token: number; outcome: string } | undefined;
        // The model of a crashed claim's reservation: which fingerprint may still take the key, until when.
        let reserved: { fingerprint: string; until: number } | undefined;
        for (const o of ops) {
          const before = await store.get('k');
          switch (o.kind) {
            case 'claim': {
              const result = await store.claim('k', {
                fingerprint: o.fingerprint,
                leaseMs: o.leaseMs,
                reserveMs: o.reserveMs,
              });
              const blockedByReservation =
                before === undefined &&
                reserved !== undefined &&
                reserved.fingerprint !== o.fingerprint &&
                reserved.until > clock.now();
              // A claim wins exactly when nothing live holds the key and no reservation keeps it.
              expect(result.claimed).toBe(before === undefined && !blockedByReservation);
              if (result.claimed) {
                expect(result.token).toBeGreaterThan(tokens.at(-1) ?? 0);
                tokens.push(result.token);
                completed = undefined;
                reserved =
                  o.reserveMs !== undefined && o.reserveMs > o.leaseMs
                    ? { fingerprint: o.fingerprint, until: clock.now() + o.reserveMs }
                    : undefined;
              } else if (blockedByReservation) {
                expect(result.record.status).toBe('in_progress');
                expect(result.record.fingerprint).toBe(reserved?.fingerprint);
              } else {
                expect(result.record).toEqual(before);
              }
              break;
            }
            case 'complete': {
              const token = tokens[o.holder % Math.max(tokens.length, 1)] ?? 1;
              const ok = await store.complete(
                'k',
                token,
                Buffer.from(`out-${token}`),
                o.retentionMs,
              );
              const heldByToken = before?.status === 'in_progress' && before.token === token;
              const resend = before?.status === 'completed' && before.token === token;
              expect(ok).toBe(heldByToken || resend);
              if (heldByToken) {
                completed = { token, outcome: `out-${token}` };
                reserved = undefined;
              }
              break;
            }
            case 'release': {
              const token = tokens[o.holder % Math.max(tokens.length, 1)] ?? 1;
              const ok = await store.release('k', token);
              expect(ok).toBe(before?.status === 'in_progress' && before.token === token);
              if (ok) reserved = undefined;
              break;
            }
            case 'extend': {
              const token = tokens[o.holder % Math.max(tokens.length, 1)] ?? 1;
              const ok = await store.extend('k', token, o.leaseMs);
              expect(ok).toBe(before?.status === 'in_progress' && before.token === token);
              break;
            }
            case 'advance':
              clock.advance(o.ms);
              break;
          }
          // A completed record never changes until it expires.
          const after = await store.get('k');
          if (after?.status === 'completed') {
            expect(completed).toBeDefined();
            expect(after.token).toBe(completed?.token);
            expect(Buffer.from(after.outcome).toString()).toBe(completed?.outcome);
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});
