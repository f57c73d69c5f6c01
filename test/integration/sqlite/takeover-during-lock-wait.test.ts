/**
 * The SQLite store reads its clock for `complete`, `extend`, `release`, `saveStep` and the completion batches
 * before it waits for the write lock, so it judges the holder's lease as it stood when the call began (up
 * to `busyTimeoutMs` early). Another process may take the key over while the call waits. The token guard
 * fences such a holder out all the same: these tests commit the takeover (another store, its clock past the
 * lease) right after the holder's store has read its clock, where a wait for the lock would put it.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { ClaimResult } from '../../../src/index.js';
import { type SqliteStore, sqliteStore } from '../../../src/sqlite/index.js';

const T = 1_700_000_000_000;
const LEASE_MS = 1000;

/** A holder's store whose next clock read lets another process take its key over first. */
function fixture() {
  const db = new Database(':memory:');
  let holderNow = T;
  let beforeNextRead: (() => void) | undefined;
  const holder = sqliteStore({
    database: db,
    clock: {
      now: () => {
        const hook = beforeNextRead;
        beforeNextRead = undefined;
        hook?.();
        return holderNow;
      },
    },
  });
  // Another process, whose clock is past the holder's lease.
  const other = sqliteStore({ database: db, clock: { now: () => T + LEASE_MS + 500 } });
  let takeover: Promise<ClaimResult> | undefined;
  return {
    holder,
    other,
    /** The holder's claim of `key` at T. */
    async claim(key: string): Promise<number> {
      holderNow = T;
      const claim = await holder.claim(key, { fingerprint: 'fp', leaseMs: LEASE_MS });
      if (!claim.claimed) throw new Error('claimed');
      return claim.token;
    },
    /**
     * The holder's next call reads a time its lease is still live at, and the other process takes `key`
     * over right after that read (synchronously: better-sqlite3 runs the claim within the call).
     */
    takenOverDuringNextCall(key: string): void {
      holderNow = T + LEASE_MS - 1;
      beforeNextRead = () => {
        takeover = other.claim(key, { fingerprint: 'fp', leaseMs: 60_000 });
      };
    },
    async takeover(): Promise<ClaimResult> {
      if (takeover === undefined) throw new Error('no takeover happened');
      return takeover;
    },
  };
}

const outcome = Uint8Array.of(1);

describe('sqlite store: a takeover committed while a holder waited for the write lock', () => {
  // Each operation's answer for the holder's one item: true when it was applied.
  it.each<[string, (store: SqliteStore, key: string, token: number) => Promise<boolean>]>([
    ['complete', (s, key, token) => s.complete(key, token, outcome, 60_000)],
    ['extend', (s, key, token) => s.extend(key, token, 60_000)],
    ['release', (s, key, token) => s.release(key, token)],
    ['saveStep', (s, key, token) => s.saveStep(key, token, 'charge', outcome)],
    [
      'completeMany',
      async (s, key, token) =>
        (await s.completeMany([{ key, token, outcome, retentionMs: 60_000 }]))[0] as boolean,
    ],
    [
      'completeAndClaimMany',
      async (s, key, token) =>
        (await s.completeAndClaimMany([{ key, token, outcome, retentionMs: 60_000 }], []))
          .completed[0] as boolean,
    ],
  ])('fences the holder out of %s', async (operation, call) => {
    // Arrange
    const f = fixture();
    const token = await f.claim(operation);
    f.takenOverDuringNextCall(operation);
    // Act
    const applied = await call(f.holder, operation, token);
    // Assert
    const takeover = await f.takeover();
    expect(takeover).toMatchObject({ claimed: true, attempt: 2 });
    expect(applied).toBe(false);
    const record = await f.other.get(operation);
    expect(record).toMatchObject({
      status: 'in_progress',
      token: takeover.claimed ? takeover.token : -1,
    });
  });
});
