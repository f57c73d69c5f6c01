import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type OutboxDatabase, openOutboxDatabase } from '../../helpers/outbox-postgres.js';
import { recordingPublisher, waitFor } from '../../helpers/outbox-recorder.js';
import {
  createRelay,
  enqueue,
  migrateOutbox,
  type OutboxMessage,
  postgresOutboxSource,
  type Relay,
} from './postgres-imports.js';

// Rows a round cannot publish with the others: over what node-postgres can read back, or at least
// maxBatchBytes (claimed alone). The real read limit is 268,435,443 bytes, too much for a shared test
// machine: for the unreadable rows, the pool below hands the claim 1000 bytes as that limit ($4), as
// postgres-outbox.test.ts does with the statement itself.
const READ_LIMIT = 1000;

let db: OutboxDatabase;
const relays: Relay[] = [];

beforeAll(async () => {
  db = await openOutboxDatabase(4);
});

afterAll(async () => {
  await Promise.all(relays.map((relay) => relay.stop()));
  await db?.close();
});

/** A table of its own holding rows of these payload sizes, enqueued in this order (so claimed in it). */
async function tableWith(table: string, sizes: number[]): Promise<string[]> {
  await migrateOutbox(db.pool, { schema: db.schema, table });
  return db.transaction(async (tx) => {
    const ids: string[] = [];
    for (const size of sizes) {
      const { rowId } = await enqueue(
        tx,
        { topic: 'bytes', payload: Buffer.alloc(size) },
        { schema: db.schema, table },
      );
      ids.push(rowId);
    }
    return ids;
  });
}

/**
 * The PostgreSQL source on `table`, counting its claims; `unreadableOver` stands in for the read limit
 * (by default the real one).
 */
function sourceOn(table: string, unreadableOver?: number) {
  const counts = { claims: 0 };
  const pool = {
    query(text: string, values: unknown[] = []) {
      if (!/FOR UPDATE SKIP LOCKED/.test(text)) return db.pool.query(text, values);
      counts.claims++;
      return db.pool.query(text, [...values.slice(0, 3), unreadableOver ?? values[3]]);
    },
  };
  return {
    source: postgresOutboxSource({ pool, schema: db.schema, table, listen: false }),
    counts,
  };
}

const byNumber = (a: string, b: string) => Number(a) - Number(b);

async function stored(table: string) {
  const { rows } = await db.pool.query(
    `SELECT id::text, attempts, last_error, sent_at IS NOT NULL AS sent FROM "${db.schema}".${table} ORDER BY id`,
  );
  return rows as Array<{ id: string; attempts: number; last_error: string | null; sent: boolean }>;
}

describe('relay (PostgreSQL): a row it cannot read', () => {
  it('is reported to onPublishFailed on each attempt, with a backoff, like a refused publish', async () => {
    // Arrange: before, such a row was left out of the batch by the source: its reason went to last_error
    // only, and an operator alerting on onPublishFailed never heard of it.
    const ids = await tableWith('oversized_hook', [10, 5000, 10]);
    const { source } = sourceOn('oversized_hook', READ_LIMIT);
    const failures: Array<{ rowId: string; attempt: number; error: string; retryInMs: number }> =
      [];
    const publisher = recordingPublisher();
    const relay = createRelay({
      source,
      publisher,
      backoff: () => 3_600_000,
      purgeIntervalMs: 0,
      onPublishFailed: (message, error, retryInMs) =>
        failures.push({
          rowId: message.rowId,
          attempt: message.attempt,
          error: String((error as Error).message),
          retryInMs,
        }),
    });
    relays.push(relay);

    // Act
    const round = await relay.runOnce();

    // Assert: claimed and failed with the others published; reported once, with the reason; its retry
    // after the backoff (an hour), not the 30 s lease.
    expect(round).toEqual({ claimed: 3, published: 2, failed: 1, deferred: 0 });
    expect(failures).toEqual([
      {
        rowId: ids[1],
        attempt: 1,
        error: expect.stringMatching(
          /^payload of 5000 bytes, over the 1000 bytes node-postgres can read/,
        ),
        retryInMs: 3_600_000,
      },
    ]);
    expect(publisher.messages.map((message) => message.rowId).sort(byNumber)).toEqual([
      ids[0],
      ids[2],
    ]);
    const { rows } = await db.pool.query(
      `SELECT last_error, available_at > now() + interval '30 minutes' AS backed_off
       FROM "${db.schema}".oversized_hook WHERE id = $1`,
      [ids[1]],
    );
    expect(rows).toEqual([
      {
        last_error: expect.stringMatching(/^Error: payload of 5000 bytes, over the 1000 bytes/),
        backed_off: true,
      },
    ]);
  });

  it('claimed alone first (over maxBatchBytes too), does not end drain() before the rows behind it', async () => {
    // Arrange: the unreadable row comes first and is over maxBatchBytes, so it is the whole claim. Before,
    // the source dropped it and the round claimed 0 rows: drain() returned with the two rows behind it
    // unsent, and the running loop slept a poll interval.
    const ids = await tableWith('oversized_first', [5000, 10, 10]);
    const { source } = sourceOn('oversized_first', READ_LIMIT);
    const failed: string[] = [];
    const relay = createRelay({
      source,
      publisher: recordingPublisher(),
      maxBatchBytes: READ_LIMIT,
      purgeIntervalMs: 0,
      onPublishFailed: (message) => failed.push(message.rowId),
    });
    relays.push(relay);

    // Act
    const total = await relay.drain();

    // Assert
    expect(total).toEqual({ claimed: 3, published: 2, failed: 1, deferred: 0 });
    expect(failed).toEqual([ids[0]]);
    expect((await stored('oversized_first')).map((row) => row.sent)).toEqual([false, true, true]);
  });
});

describe('relay (PostgreSQL): a failing row of maxBatchBytes or more, with a zero backoff', () => {
  it('is not claimed again at once, round after round, and does not starve the rows behind it', async () => {
    // Arrange: the 5000-byte row is claimed alone (maxBatchBytes 1000), which makes the round "full", so
    // the loop claimed again without sleeping; the broker refuses it and the backoff is 0, so it was
    // claimable at once: before, the loop claimed it again and again (thousands of statements a second)
    // and, first in claim order, it was the whole of every claim: the rows behind it were never published.
    const ids = await tableWith('oversized_hot', [5000, 10, 10]);
    const { source, counts } = sourceOn('oversized_hot');
    const retries: number[] = [];
    const published: string[] = [];
    const relay = createRelay({
      source,
      publisher: {
        async publish(message: OutboxMessage) {
          if (message.payload.byteLength >= 1000) throw new Error('message too large');
          published.push(message.rowId);
        },
      },
      maxBatchBytes: 1000,
      backoff: () => 0,
      pollIntervalMs: 60_000,
      purgeIntervalMs: 0,
      onPublishFailed: (_message, _error, retryInMs) => retries.push(retryInMs),
    });
    relays.push(relay);

    // Act
    relay.start();
    await waitFor('the rows behind the failing one', () => published.length === 2, 5000).catch(
      () => {},
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    await relay.stop();

    // Assert: the failing row waits a poll interval before its next claim (its delay raised to it), the
    // next claim takes the rows behind it (under the budget, so not full), then the loop sleeps: two claims.
    expect(counts.claims).toBe(2);
    expect(retries).toEqual([60_000]);
    expect(published.sort(byNumber)).toEqual([ids[1], ids[2]]);
    expect((await stored('oversized_hot')).map((row) => [row.attempts, row.sent])).toEqual([
      [1, false],
      [1, true],
      [1, true],
    ]);
  });
});
