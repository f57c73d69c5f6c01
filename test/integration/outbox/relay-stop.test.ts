/**
 * `relay.stop()` while the broker does not answer: the round in flight starts no new publish, so stop()
 * waits for the publishes in flight only (at most `publishTimeoutMs`), and the batch's rows it never
 * started are handed back to be claimed at once. Before, the round went on through its batch, one wave
 * of timeouts after another, until nearly the end of the lease: stop() took almost `leaseMs`, and the
 * unstarted rows stayed claimed until then.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type OutboxDatabase, openOutboxDatabase } from '../../helpers/outbox-postgres.js';
import { waitFor } from '../../helpers/outbox-recorder.js';
import { createRelay, enqueue, postgresOutboxSource } from './postgres-imports.js';

let db: OutboxDatabase;

beforeAll(async () => {
  db = await openOutboxDatabase();
});

afterAll(async () => {
  await db?.close();
});

describe('relay.stop() with the broker not answering (PostgreSQL)', () => {
  it('resolves within one publish timeout and hands the unstarted rows back, their attempts fenced', async () => {
    // Arrange: 20 rows; a publisher that never confirms (a blackholed broker); 2 publishes at a time.
    const ids = await db.transaction(async (tx) => {
      const out: string[] = [];
      for (let i = 0; i < 20; i++) {
        out.push(
          (await enqueue(tx, { topic: 'stalled', payload: i }, { schema: db.schema })).messageId,
        );
      }
      return out;
    });
    const started = new Set<string>();
    const relay = createRelay({
      source: postgresOutboxSource({ pool: db.pool, schema: db.schema, listen: false }),
      publisher: {
        publish: (message) => {
          started.add(message.id);
          return new Promise<void>(() => {});
        },
      },
      batchSize: 20,
      concurrency: 2,
      leaseMs: 10_000,
      publishTimeoutMs: 1000,
      backoff: () => 60_000,
      purgeIntervalMs: 0,
    });
    relay.start();
    await waitFor('the first publishes in flight', () => started.size === 2);

    // Act
    const stopping = performance.now();
    await relay.stop();
    const stopMs = performance.now() - stopping;

    // Assert: stop() waited for the two publishes in flight (1 s timeout), not for a wave after another
    // until the lease's end (about 8.5 s here). The 18 rows never started are claimable right away, by
    // another relay, while the two that timed out wait out their backoff.
    expect(stopMs).toBeLessThan(3000);
    expect(started.size).toBe(2);
    const other = postgresOutboxSource({ pool: db.pool, schema: db.schema, listen: false });
    const taken = await other.claim(100, 10_000);
    expect(taken.map((message) => message.id).sort()).toEqual(
      ids.filter((id) => !started.has(id)).sort(),
    );
    // Handed back only while no other claim came since: the first relay's attempt no longer matches.
    expect(taken.every((message) => message.attempt === 2)).toBe(true);
    const stale = taken.map((message) => ({ rowId: message.rowId, attempt: message.attempt - 1 }));
    await other.release?.(stale);
    expect(await other.claim(100, 10_000)).toEqual([]);
    await other.release?.(
      taken.map((message) => ({ rowId: message.rowId, attempt: message.attempt })),
    );
    expect(await other.claim(100, 10_000)).toHaveLength(taken.length);
  });
});
