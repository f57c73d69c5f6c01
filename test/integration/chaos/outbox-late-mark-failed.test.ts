/**
 * Two relays over one outbox table, the first one slow to record a failed publish (a slow commit, a GC
 * pause, a packet retransmitted after a partition): its lease ran out meanwhile and the second relay took
 * the row over. The late record must not cut the second relay's lease short, or a third claim publishes
 * the row while the second is still publishing it (docs/outbox.md: "relays never publish the same row in
 * the normal case: a claim takes disjoint rows and leases them").
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createRelay,
  enqueue,
  migrateOutbox,
  type OutboxSource,
  type Publisher,
  postgresOutboxSource,
  sqliteOutboxSource,
} from '../../../src/outbox/index.js';
import { type OutboxDatabase, openOutboxDatabase } from '../../helpers/outbox-postgres.js';

/** The first relay's lease; its failure record lands this much later than its publish failed. */
const SHORT_LEASE_MS = 600;
const LATE_BY_MS = 1000;

interface Outbox {
  source(): OutboxSource;
  enqueueOne(): Promise<string>;
  close(): Promise<void>;
}

async function postgresOutbox(): Promise<Outbox> {
  const db: OutboxDatabase = await openOutboxDatabase(4);
  return {
    source: () => postgresOutboxSource({ pool: db.pool, schema: db.schema, listen: false }),
    enqueueOne: () =>
      db.transaction(
        async (tx) =>
          (await enqueue(tx, { topic: 'late', payload: {} }, { schema: db.schema })).messageId,
      ),
    close: () => db.close(),
  };
}

async function sqliteOutbox(): Promise<Outbox> {
  const dir = mkdtempSync(join(tmpdir(), 'outbox-late-'));
  const db = new Database(join(dir, 'app.db'), { timeout: 5000 });
  db.pragma('journal_mode = WAL');
  migrateOutbox(db);
  return {
    source: () => sqliteOutboxSource({ database: db }),
    enqueueOne: async () =>
      db.transaction(() => enqueue(db, { topic: 'late', payload: {} }).messageId)(),
    close: async () => {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe.each([
  ['PostgreSQL', postgresOutbox],
  ['SQLite', sqliteOutbox],
])('outbox relay (%s): a failure recorded after the lease ran out', (_name, open) => {
  let outbox: Outbox;
  afterAll(() => outbox?.close());

  it('does not shorten the lease of the relay that took the row over: no third relay publishes it meanwhile', async () => {
    // Arrange
    outbox = await open();
    const messageId = await outbox.enqueueOne();
    const real = outbox.source();
    const slow: OutboxSource = {
      ...real,
      markFailed: async (...args) => {
        await sleep(LATE_BY_MS);
        return real.markFailed(...args);
      },
    };
    const failing: Publisher = {
      publish: () => Promise.reject(new Error('broker said no')),
    };
    const published: string[] = [];
    const slowOk: Publisher = {
      publish: async (message) => {
        await sleep(1500);
        published.push(message.id);
      },
    };
    const quick = { initialMs: 10, maxMs: 10, jitter: 0 };
    const first = createRelay({
      source: slow,
      publisher: failing,
      leaseMs: SHORT_LEASE_MS,
      publishTimeoutMs: 500,
      backoff: quick,
    });
    const second = createRelay({
      source: real,
      publisher: slowOk,
      leaseMs: 5000,
      publishTimeoutMs: 2000,
    });
    const third = createRelay({
      source: real,
      publisher: slowOk,
      leaseMs: 5000,
      publishTimeoutMs: 2000,
    });

    // Act: the first relay fails the publish and records it late; the second claims the row after the
    // first lease, and is still publishing when the late record lands.
    const firstRound = first.runOnce();
    await sleep(SHORT_LEASE_MS + 100);
    const secondRound = second.runOnce();
    await firstRound;
    await sleep(100); // past the backoff the late record asked for
    const thirdRound = await third.runOnce();

    // Assert
    expect(thirdRound.claimed).toBe(0);
    expect(await secondRound).toMatchObject({ claimed: 1, published: 1 });
    expect(published).toEqual([messageId]);
  });
});
