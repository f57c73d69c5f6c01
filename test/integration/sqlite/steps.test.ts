/**
 * Recorded steps (`saveStep`, `loadSteps`) in the SQLite store, beyond the conformance checks: how the
 * `steps` column holds them (a JSON object of base64 values, names with `.`, `:`, `-` as plain members),
 * when the column is kept and when it is cleared (takeovers by every claim path, extend, complete, the
 * transactional mode, rows left by a process of before migration 0002), the name check, and two
 * connections to one file sharing them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { isInvalidOptionsError } from '../../../src/index.js';
import { sqliteStore, sqliteTransactional } from '../../../src/sqlite/index.js';
import { ManualClock } from '../../helpers/clock.js';

const DAY = 86_400_000;
const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-steps-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A store on an in-memory database, with a clock the test moves by hand. */
function fixture() {
  const db = new Database(':memory:');
  const clock = new ManualClock();
  const store = sqliteStore({ database: db, clock });
  const steps = (key: string) =>
    (
      db.prepare('SELECT steps FROM idempotency_records WHERE key = ?').get(key) as
        | { steps: string | null }
        | undefined
    )?.steps;
  const claim = async (key: string, fingerprint: string, leaseMs = 100, reserveMs = DAY) => {
    const result = await store.claim(key, { fingerprint, leaseMs, reserveMs });
    if (!result.claimed) throw new Error(`claim of ${key} lost`);
    return result;
  };
  return { db, clock, store, steps, claim };
}

const bytes = (text: string) => new Uint8Array(Buffer.from(text));

describe('sqlite store steps', () => {
  it('keeps every name as one member of a JSON object of base64 values, bytes exact', async () => {
    // Arrange
    const { store, steps, claim } = fixture();
    const held = await claim('k', 'fp');
    const binary = Uint8Array.from({ length: 65_536 }, (_, i) => (i * 7) % 256);
    // A view into a larger buffer: only its own bytes are recorded.
    const view = new Uint8Array([9, 1, 2, 3, 9]).subarray(1, 4);
    const names = [
      'ship.v2:eu-1_x',
      'a.b.c',
      '__proto__',
      'constructor',
      '0',
      '-',
      'x'.repeat(100),
    ];
    // Act
    for (const name of names)
      expect(await store.saveStep('k', held.token, name, bytes(name))).toBe(true);
    expect(await store.saveStep('k', held.token, 'binary', binary)).toBe(true);
    expect(await store.saveStep('k', held.token, 'view', view)).toBe(true);
    expect(await store.saveStep('k', held.token, 'empty', new Uint8Array(0))).toBe(true);
    const loaded = await store.loadSteps('k', held.token);
    // Assert
    const column = JSON.parse(steps('k') ?? 'null') as Record<string, string>;
    expect(Object.keys(column).sort()).toEqual([...names, 'binary', 'view', 'empty'].sort());
    expect(column['a.b.c']).toBe(Buffer.from('a.b.c').toString('base64'));
    expect(column.view).toBe('AQID');
    if (loaded === undefined) throw new Error('the holder got no steps');
    expect(Object.getPrototypeOf(loaded)).toBe(Object.prototype);
    expect(Object.keys(loaded).sort()).toEqual(Object.keys(column).sort());
    for (const name of names) expect(loaded[name], name).toEqual(bytes(name));
    expect(Object.hasOwn(loaded, '__proto__')).toBe(true);
    expect(loaded.binary).toEqual(binary);
    expect(loaded.view).toEqual(new Uint8Array([1, 2, 3]));
    expect(loaded.empty).toEqual(new Uint8Array(0));
  });

  it('refuses a name outside [A-Za-z0-9._:-]{1,100} and records nothing', async () => {
    // Arrange
    const { store, steps, claim } = fixture();
    const held = await claim('k', 'fp');
    // Act / Assert: a `"` would leave the quoted JSON path.
    for (const name of ['a"."b', '', 'x'.repeat(101), 'a b', 'é', '$']) {
      const error = await store.saveStep('k', held.token, name, bytes('x')).catch((e) => e);
      expect(isInvalidOptionsError(error), JSON.stringify(name)).toBe(true);
    }
    expect(steps('k')).toBeNull();
    expect(await store.loadSteps('k', held.token)).toEqual({});
  });

  it('fences saves and loads to the holder with a live lease, by the store clock', async () => {
    // Arrange
    const { clock, store, steps, claim } = fixture();
    const held = await claim('k', 'fp', 100);
    expect(await store.saveStep('k', held.token, 'charge', bytes('ch_1'))).toBe(true);
    // Act / Assert: an extension keeps the steps and the right to record more.
    clock.advance(99);
    expect(await store.extend('k', held.token, 100)).toBe(true);
    clock.advance(99);
    expect(await store.saveStep('k', held.token, 'ship', bytes('trk'))).toBe(true);
    // The lease ends at leaseUntil exactly, as for complete and extend; a reserved dead lease is no hold.
    clock.advance(1);
    expect(await store.saveStep('k', held.token, 'late', bytes('x'))).toBe(false);
    expect(await store.loadSteps('k', held.token)).toBeUndefined();
    expect(await store.complete('k', held.token, bytes('done'), DAY)).toBe(false);
    expect(Object.keys(JSON.parse(steps('k') ?? '{}'))).toEqual(['charge', 'ship']);
    expect(await store.saveStep('absent', held.token, 'charge', bytes('x'))).toBe(false);
    expect(await store.loadSteps('absent', held.token)).toBeUndefined();
  });

  it('keeps the steps on a same-fingerprint takeover by claim, claimMany and completeAndClaimMany', async () => {
    // Arrange: three crashed claims of "fp", each with a step.
    const { clock, store, steps, claim } = fixture();
    for (const key of ['a', 'b', 'c']) {
      const crashed = await claim(key, 'fp');
      expect(await store.saveStep(key, crashed.token, 'charge', bytes(`ch_${key}`))).toBe(true);
    }
    const done = await claim('d', 'fp', 60_000);
    clock.advance(100);
    // Act
    const one = await store.claim('a', { fingerprint: 'fp', leaseMs: 100 });
    const many = await store.claimMany([{ key: 'b', fingerprint: 'fp', leaseMs: 100 }]);
    const both = await store.completeAndClaimMany(
      [{ key: 'd', token: done.token, outcome: bytes('ok'), retentionMs: DAY }],
      [{ key: 'c', fingerprint: 'fp', leaseMs: 100 }],
    );
    // Assert
    const takeovers = [one, many[0], both.claimed[0]];
    for (const [i, key] of ['a', 'b', 'c'].entries()) {
      const result = takeovers[i];
      if (!result?.claimed) throw new Error(`takeover of ${key} lost`);
      expect(result.attempt).toBe(2);
      expect(await store.loadSteps(key, result.token)).toEqual({ charge: bytes(`ch_${key}`) });
    }
    // The completion in the same transaction cleared its own row's steps (it had none: NULL either way).
    expect(both.completed).toEqual([true]);
    expect(steps('d')).toBeNull();
  });

  it('starts from no steps after another fingerprint takes over, and clears them on completion', async () => {
    // Arrange
    const { clock, store, steps, claim } = fixture();
    const crashed = await claim('k', 'fp-a', 100, 300);
    expect(await store.saveStep('k', crashed.token, 'charge', bytes('ch_a'))).toBe(true);
    // Act / Assert: while reserved, another fingerprint is refused and the steps stay.
    clock.advance(100);
    expect((await store.claim('k', { fingerprint: 'fp-b', leaseMs: 100 })).claimed).toBe(false);
    expect(steps('k')).not.toBeNull();
    // Reservation over: fp-b takes the key and gets nothing of fp-a's.
    clock.advance(200);
    const other = await claim('k', 'fp-b', 100, 0);
    expect(other.attempt).toBe(2);
    expect(steps('k')).toBeNull();
    expect(await store.loadSteps('k', other.token)).toEqual({});
    // fp-a coming back later (fp-b crashed too) gets none of its old steps back either.
    expect(await store.saveStep('k', other.token, 'charge', bytes('ch_b'))).toBe(true);
    clock.advance(100);
    const back = await claim('k', 'fp-a');
    expect(await store.loadSteps('k', back.token)).toEqual({});
    // Completion clears the column.
    expect(await store.saveStep('k', back.token, 'charge', bytes('ch_a2'))).toBe(true);
    expect(await store.complete('k', back.token, bytes('done'), 100)).toBe(true);
    expect(steps('k')).toBeNull();
  });

  it('drops steps that a process of before migration 0002 left on a completed row', async () => {
    // Arrange: that process's complete.sql does not clear the column (nor does it know of steps).
    const { db, clock, store, steps, claim } = fixture();
    const held = await claim('k', 'fp');
    expect(await store.saveStep('k', held.token, 'charge', bytes('ch_1'))).toBe(true);
    db.prepare(
      `UPDATE idempotency_records SET status = 'completed', outcome = x'01', completed_at = ?,
         expires_at = ? WHERE key = 'k'`,
    ).run(clock.now(), clock.now() + 100);
    expect(steps('k')).not.toBeNull();
    // Act / Assert: the completed row gives no steps to anyone, and a new claim after the outcome
    // expired (same request or not) starts from none.
    expect(await store.loadSteps('k', held.token)).toBeUndefined();
    clock.advance(100);
    const next = await claim('k', 'fp');
    expect(next.attempt).toBe(1);
    expect(steps('k')).toBeNull();
    expect(await store.loadSteps('k', next.token)).toEqual({});
  });

  it('clears the steps of a crashed engine claim that the transactional mode takes over and completes', async () => {
    // Arrange
    const { db, clock, store, steps } = fixture();
    const transactional = sqliteTransactional({ database: db, clock });
    const key = transactional.storageKeyFor('order');
    const crashed = await store.claim(key, { fingerprint: 'fp', leaseMs: 100, reserveMs: DAY });
    if (!crashed.claimed) throw new Error('setup claim lost');
    expect(await store.saveStep(key, crashed.token, 'charge', bytes('ch_1'))).toBe(true);
    clock.advance(100);
    // Act
    const outcome = await transactional.runInTransaction(
      { key: 'order', fingerprint: 'fp' },
      (tx) => {
        return tx.attempt;
      },
    );
    // Assert
    expect(outcome).toMatchObject({ status: 'executed', value: 2 });
    expect(db.prepare('SELECT status FROM idempotency_records').all()).toEqual([
      { status: 'completed' },
    ]);
    expect(steps(key)).toBeNull();
  });

  it('shares steps between two connections to one file: the takeover reads what the other recorded', async () => {
    // Arrange
    const file = join(dir, 'shared.db');
    const clock = new ManualClock();
    const first = sqliteStore({ database: file, clock });
    const second = sqliteStore({ database: file, clock });
    const crashed = await first.claim('k', { fingerprint: 'fp', leaseMs: 100, reserveMs: DAY });
    if (!crashed.claimed) throw new Error('setup claim lost');
    expect(await first.saveStep('k', crashed.token, 'charge', bytes('ch_1'))).toBe(true);
    clock.advance(100);
    // Act
    const takeover = await second.claim('k', { fingerprint: 'fp', leaseMs: 100, reserveMs: DAY });
    // Assert
    if (!takeover.claimed) throw new Error('takeover lost');
    expect(await second.loadSteps('k', takeover.token)).toEqual({ charge: bytes('ch_1') });
    expect(await first.saveStep('k', crashed.token, 'ship', bytes('x'))).toBe(false);
    expect(await first.loadSteps('k', takeover.token)).toEqual({ charge: bytes('ch_1') });
    await first.close();
    await second.close();
  });
});
