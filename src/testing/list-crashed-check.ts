/**
 * The conformance check of `Store.listCrashed`: a store lists exactly the crashed claims (a dead lease
 * still reserved for its request), whatever else its keyspace holds, and its paging gives each of them
 * once. Kept apart from `checks.ts`, whose `check` wrapper gives it a store and its keys.
 * @module
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { isInvalidOptionsError } from '../core/errors.js';
import type { CrashedRecordInspection, Store } from '../store/store.js';
import { DAY, sleep } from './check-kit.js';

/** What the check needs besides the store under test. */
export interface ListCrashedCheckContext {
  /** A unique key of the check (under the check's prefix). */
  key(label?: string): string;
  /** The prefix `createStore` was given for the store under test. */
  prefix: string;
  /** The suite's short lease, in ms. */
  lease: number;
  /**
   * A second store under another prefix, as `createStore` builds it: a Redis store under a longer prefix
   * (whose keys the shorter one's `SCAN` must not take for its own), another memory store or SQLite file,
   * or the same PostgreSQL table.
   */
  createOtherStore(prefix: string): Promise<Store> | Store;
  /** Dispose of the store `createOtherStore` built. */
  disposeOtherStore(store: Store): Promise<void> | void;
}

// Small enough that the check's own crashed claims span several pages.
const PAGE = 2;

/**
 * Check `store.listCrashed` (a store without it passes: the method is optional). Crashed claims are
 * listed with their record and the store clock, once each across pages; a live lease (reserved or not),
 * a completed record, a dead lease whose reservation ended, a dead unreserved lease and a released claim
 * are not; a crashed claim under another prefix is listed exactly when the store itself can inspect it
 * (a SQL table shared by both stores), never otherwise.
 */
export async function checkListCrashed(
  store: Store,
  context: ListCrashedCheckContext,
): Promise<void> {
  if (store.listCrashed === undefined) return;
  const { key, lease, prefix } = context;
  for (const limit of [0, -1, 1.5, Number.NaN]) {
    await assert.rejects(
      store.listCrashed({ limit }),
      isInvalidOptionsError,
      `listCrashed refuses limit ${limit}`,
    );
  }

  const crashed = Array.from({ length: 5 }, (_, i) => key(`crashed${i}`));
  const live = key('live');
  const done = key('done');
  const ended = key('ended');
  const unreserved = key('unreserved');
  const released = key('released');
  const tokens = new Map<string, number>();
  for (const k of crashed) {
    const claim = await store.claim(k, { fingerprint: `fp-${k}`, leaseMs: lease, reserveMs: DAY });
    assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
    tokens.set(k, claim.token);
  }
  const steps = store.capabilities.steps && store.saveStep !== undefined;
  const withStep = crashed[0] as string;
  if (steps) {
    const token = tokens.get(withStep) as number;
    assert.equal(await store.saveStep?.(withStep, token, 'charge', Buffer.from('ch_1')), true);
  }
  const held = await store.claim(live, { fingerprint: 'fp', leaseMs: 60_000, reserveMs: DAY });
  const completing = await store.claim(done, { fingerprint: 'fp', leaseMs: 60_000 });
  const ending = await store.claim(ended, { fingerprint: 'fp', leaseMs: 50, reserveMs: 100 });
  const bare = await store.claim(unreserved, { fingerprint: 'fp', leaseMs: 50 });
  const releasing = await store.claim(released, {
    fingerprint: 'fp',
    leaseMs: 60_000,
    reserveMs: DAY,
  });
  assert.ok(
    held.claimed && completing.claimed && ending.claimed && bare.claimed && releasing.claimed,
  );
  assert.equal(await store.complete(done, completing.token, Buffer.from('outcome'), DAY), true);
  assert.equal(await store.release(released, releasing.token), true);

  // Longer than the store's own prefix, and starting with it: a nested prefix.
  const otherPrefix = `${prefix}other:`;
  const other = await context.createOtherStore(otherPrefix);
  const elsewhere = `${otherPrefix}crashed:${randomUUID()}`;
  try {
    const claim = await other.claim(elsewhere, {
      fingerprint: 'fp',
      leaseMs: lease,
      reserveMs: DAY,
    });
    assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
    await sleep(lease + 150);

    const listed = await listAll(store);
    for (const k of crashed) {
      assert.equal(listed.get(k)?.length, 1, `the crashed claim ${k} is listed exactly once`);
    }
    const [entry] = listed.get(withStep) as CrashedRecordInspection[];
    assert.ok(entry, 'the crashed claim is listed');
    assert.equal(entry.record.token, tokens.get(withStep), 'with its record');
    assert.equal(entry.record.fingerprint, `fp-${withStep}`);
    assert.ok(Math.abs(entry.now - Date.now()) < 60_000, 'now is the store clock, in epoch ms');
    if (steps) {
      const step = entry.record.steps?.charge;
      assert.ok(step !== undefined && Buffer.from(step).equals(Buffer.from('ch_1')), 'its step');
    }
    assert.ok(!listed.has(live), 'a live lease is not crashed, even with a reservation');
    assert.ok(!listed.has(done), 'a completed record is not crashed');
    assert.ok(!listed.has(ended), 'a dead lease whose reservation ended is not crashed');
    assert.ok(!listed.has(unreserved), 'a dead lease without a reservation is not crashed');
    assert.ok(!listed.has(released), 'a released claim is not crashed');
    // Another prefix's records are the store's own only when the two share their keyspace.
    const inspected = await store.inspect?.(elsewhere);
    assert.equal(
      listed.has(elsewhere),
      inspected !== undefined,
      'a crashed claim under another prefix is listed exactly when the store can inspect it',
    );
  } finally {
    await context.disposeOtherStore(other);
  }

  // Listing changed nothing: the same request still takes its key over.
  const again = await store.claim(withStep, { fingerprint: `fp-${withStep}`, leaseMs: 60_000 });
  assert.ok(again.claimed, 'the same request takes a listed key over');
}

/**
 * Every key of the listing, read `PAGE` at a time until `next` is absent, with each time it came; every
 * listed record is checked against the record rules: a dead lease, still reserved, at its `now`.
 */
async function listAll(store: Store): Promise<Map<string, CrashedRecordInspection[]>> {
  const listCrashed = (store.listCrashed as NonNullable<Store['listCrashed']>).bind(store);
  const seen = new Map<string, CrashedRecordInspection[]>();
  let after: string | undefined;
  let pages = 0;
  do {
    const page = await listCrashed(after === undefined ? { limit: PAGE } : { limit: PAGE, after });
    assert.ok(page.records.length <= PAGE, `a page holds at most ${PAGE} records`);
    for (const listed of page.records) {
      const { key, record, now } = listed;
      seen.set(key, [...(seen.get(key) ?? []), listed]);
      assert.equal(record.status, 'in_progress', `${key}: a listed record is in progress`);
      assert.ok(record.leaseUntil <= now, `${key}: a live lease is not crashed`);
      assert.ok((record.reservedUntil ?? 0) > now, `${key}: a listed record is still reserved`);
    }
    assert.ok(++pages < 100_000, 'the listing ends');
    after = page.next;
  } while (after !== undefined);
  return seen;
}
