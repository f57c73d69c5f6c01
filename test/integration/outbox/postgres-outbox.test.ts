import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresOutboxNames, renderOutboxSql } from '../../../src/outbox/names.js';
import { postgresClaim } from '../../../src/outbox/sql.gen.js';
import { env } from '../../helpers/env.js';
import { type OutboxDatabase, openOutboxDatabase } from '../../helpers/outbox-postgres.js';
import { recordingPublisher, waitFor } from '../../helpers/outbox-recorder.js';
import {
  createInProcessBus,
  createRelay,
  decodePayload,
  enqueue,
  isInvalidOptionsErrorLike,
  migrateOutbox,
  type OutboxMessage,
  postgresOutboxSource,
  type Relay,
} from './postgres-imports.js';

let db: OutboxDatabase;
const relays: Relay[] = [];

beforeAll(async () => {
  db = await openOutboxDatabase();
});

afterAll(async () => {
  await Promise.all(relays.map((relay) => relay.stop()));
  await db?.close();
});

function relayOf(
  options: Partial<Parameters<typeof createRelay>[0]> &
    Pick<Parameters<typeof createRelay>[0], 'publisher'>,
  listen = true,
): Relay {
  const relay = createRelay({
    source: postgresOutboxSource({ pool: db.pool, schema: db.schema, listen }),
    pollIntervalMs: 200,
    purgeIntervalMs: 0,
    ...options,
  });
  relays.push(relay);
  return relay;
}

describe('migrateOutbox (PostgreSQL)', () => {
  it('applies each migration once, also when several processes migrate at once', async () => {
    const results = await Promise.all(
      [1, 2, 3].map(() => migrateOutbox(db.pool, { schema: db.schema })),
    );
    expect(results.every((result) => result.applied.length === 0 && result.version === 1)).toBe(
      true,
    );
    const { rows } = await db.pool.query(
      `SELECT name FROM "${db.schema}".idempotency_outbox_migrations`,
    );
    expect(rows.map((row) => row.name)).toEqual(['0001_outbox.postgres']);
  });
});

describe('enqueue (PostgreSQL)', () => {
  it('leaves no row when the transaction rolls back, and publishes a committed one exactly once with its stable id', async () => {
    const publisher = recordingPublisher();
    const relay = relayOf({ publisher });
    await expect(
      db.transaction(async (tx) => {
        await enqueue(tx, { topic: 'rolled.back', payload: { n: 1 } }, { schema: db.schema });
        throw new Error('business failure');
      }),
    ).rejects.toThrow('business failure');

    const result = await db.transaction((tx) =>
      enqueue(
        tx,
        { topic: 'committed', key: 'p-1', payload: { n: 2 }, headers: { trace: 't1' } },
        { schema: db.schema },
      ),
    );
    await relay.drain();
    await relay.drain();

    expect(publisher.messages.map((m) => m.topic)).toEqual(['committed']);
    const [message] = publisher.messages as [OutboxMessage];
    expect(message.id).toBe(result.messageId);
    expect(message.key).toBe('p-1');
    expect(message.headers).toEqual({ trace: 't1' });
    expect(decodePayload(message)).toEqual({ n: 2 });
    const rows = await db.rows();
    expect(
      rows.filter((row) => row.message_id === result.messageId && row.sent_at !== null),
    ).toHaveLength(1);
    expect(rows.some((row) => row.sent_at === null)).toBe(false);
  });

  it('uses the given messageId as the stable id, returns the first row for a retry and refuses another message under it', async () => {
    const id = `key-${Date.now()}`;
    const first = await db.transaction((tx) =>
      enqueue(tx, { topic: 't', payload: 'same', messageId: id }, { schema: db.schema }),
    );
    const again = await db.transaction((tx) =>
      enqueue(tx, { topic: 't', payload: 'same', messageId: id }, { schema: db.schema }),
    );
    expect(first).toMatchObject({ messageId: id, duplicate: false });
    expect(again).toEqual({ messageId: id, rowId: first.rowId, duplicate: true });
    await expect(
      db.transaction((tx) =>
        enqueue(tx, { topic: 't', payload: 'other', messageId: id }, { schema: db.schema }),
      ),
    ).rejects.toSatisfy(isInvalidOptionsErrorLike);
  });

  it('refuses to run in autocommit, where the message would commit apart from the business writes', async () => {
    const before = (await db.rows()).length;
    await expect(
      enqueue(db.pool, { topic: 'lonely', payload: 1 }, { schema: db.schema }),
    ).rejects.toSatisfy(isInvalidOptionsErrorLike);
    expect((await db.rows()).length).toBe(before);
  });
});

describe('enqueue (PostgreSQL): bad input is the caller’s error, not an outage', () => {
  it('refuses a NUL character (PostgreSQL text cannot hold it) as InvalidOptionsError, not StoreUnavailableError', async () => {
    const before = (await db.rows()).length;
    for (const message of [
      { topic: 'a\u0000b', payload: 1 },
      { topic: 't', payload: 1, key: 'k\u0000' },
      { topic: 't', payload: 1, headers: { 'x\u0000': 'v' } },
    ]) {
      await expect(
        db.transaction((tx) => enqueue(tx, message, { schema: db.schema })),
      ).rejects.toSatisfy(isInvalidOptionsErrorLike);
    }
    expect((await db.rows()).length).toBe(before);
  });

  it('refuses a lone surrogate (an emoji cut in half) instead of storing U+FFFD or failing as 22P02; whole emoji pass', async () => {
    // Arrange: a display name cut by UTF-16 length keeps half of the emoji. Before, the key was stored
    // as "Zoë \uFFFD", so the retried enqueue of the same message was refused as a different message,
    // and in a header PostgreSQL's jsonb refused it (22P02), reported as StoreUnavailableError.
    const half = 'Zoë 🎉 party'.slice(0, 5);
    const whole = 'Zoë 🎉 party'.slice(0, 6);
    const run = Math.random().toString(36).slice(2);
    const before = (await db.rows()).length;
    const enqueueOnce = (message: Parameters<typeof enqueue>[1]) =>
      db.transaction((tx) => enqueue(tx, message, { schema: db.schema }));

    // Act / Assert: each field with half an emoji is refused as the caller's error, nothing inserted.
    for (const message of [
      { topic: 'guest.invited', payload: 1, key: half, messageId: `invite-${run}` },
      { topic: `guest.${half}`, payload: 1 },
      { topic: 't', payload: 1, headers: { name: half } },
      { topic: 't', payload: 1, headers: { [half]: 'v' } },
      { topic: 't', payload: 1, messageId: `m-${half}` },
    ]) {
      await expect(enqueueOnce(message)).rejects.toSatisfy(
        (error: unknown) =>
          isInvalidOptionsErrorLike(error) && /lone surrogate/.test((error as Error).message),
      );
    }
    expect((await db.rows()).length).toBe(before);
    // A whole emoji is stored as it is, and the retry of the same message is the duplicate it is.
    const message = { topic: 'guest.invited', payload: 1, key: whole, messageId: `invite-${run}` };
    const first = await enqueueOnce(message);
    const retry = await enqueueOnce(message);
    expect(retry).toEqual({ ...first, duplicate: true });
  });
});

describe('enqueue (PostgreSQL): payload size', () => {
  it('refuses a payload over maxPayloadBytes, or over what a relay can read back, naming the size and the limit', async () => {
    // Arrange: before, any size was committed. A row whose bytea hex text is past V8's string limit
    // (~268 MB) failed every claim after the claim had committed, its batch stuck with it; a row a
    // broker refuses (NATS: max_payload) failed every publish, for ever.
    const before = (await db.rows()).length;
    const enqueueOnce = (payload: Buffer, options: { maxPayloadBytes?: number } = {}) =>
      db.transaction((tx) =>
        enqueue(tx, { topic: 'big', payload }, { schema: db.schema, ...options }),
      );
    const refusal = (pattern: RegExp) => (error: unknown) =>
      isInvalidOptionsErrorLike(error) && pattern.test((error as Error).message);

    // Act / Assert: over the caller's limit (NATS's default max_payload here).
    await expect(
      enqueueOnce(Buffer.alloc(1024 * 1024 + 1), { maxPayloadBytes: 1024 * 1024 }),
    ).rejects.toSatisfy(refusal(/payload is 1048577 bytes, over maxPayloadBytes \(1048576\)/));
    // Over the default, 128 MiB (RabbitMQ's default max_message_size). Never written, so never touched.
    await expect(enqueueOnce(Buffer.allocUnsafe(128 * 1024 * 1024 + 1))).rejects.toSatisfy(
      refusal(/payload is 134217729 bytes, over maxPayloadBytes \(134217728\)/),
    );
    // Over what node-postgres can read back as hex text, whatever maxPayloadBytes says.
    await expect(
      enqueueOnce(Buffer.allocUnsafe(268_435_444), { maxPayloadBytes: 512 * 1024 * 1024 }),
    ).rejects.toSatisfy(
      refusal(
        /payload is 268435444 bytes, over the 268435443 bytes a PostgreSQL relay can read back/,
      ),
    );
    await expect(enqueueOnce(Buffer.alloc(1), { maxPayloadBytes: 0 })).rejects.toSatisfy(
      refusal(/^enqueue: maxPayloadBytes: must be a positive integer, got 0$/),
    );
    expect((await db.rows()).length).toBe(before);

    // A payload at the limit is stored whole.
    const { messageId } = await enqueueOnce(Buffer.alloc(1024 * 1024, 7), {
      maxPayloadBytes: 1024 * 1024,
    });
    const stored = await db.pool.query(
      `SELECT octet_length(payload) AS bytes FROM "${db.schema}".idempotency_outbox WHERE message_id = $1`,
      [messageId],
    );
    expect(stored.rows).toEqual([{ bytes: 1024 * 1024 }]);
  });
});

describe('relay (PostgreSQL): bytes per claim', () => {
  it('claims rows only while the batch holds less than maxBatchBytes, and claims the rest at once, not after a poll', async () => {
    // Arrange: twelve rows of 1 MiB in a table of their own. Before, one claim took all of them (up to
    // batchSize): the result is held in memory whole, so 100 rows of 20 MB were gigabytes per claim.
    const table = 'outbox_batch_bytes';
    await migrateOutbox(db.pool, { schema: db.schema, table });
    const MiB = 1024 * 1024;
    await db.transaction(async (tx) => {
      for (let i = 0; i < 12; i++) {
        await enqueue(
          tx,
          { topic: 'bytes', payload: Buffer.alloc(MiB, i) },
          { schema: db.schema, table },
        );
      }
    });
    const source = postgresOutboxSource({ pool: db.pool, schema: db.schema, table, listen: false });
    const claimedBytes: number[] = [];
    const claim = source.claim.bind(source);
    source.claim = async (...args) => {
      const messages = await claim(...args);
      claimedBytes.push(messages.reduce((sum, message) => sum + message.payload.byteLength, 0));
      return messages;
    };
    const publisher = recordingPublisher();
    const relay = createRelay({
      source,
      publisher,
      maxBatchBytes: 3 * MiB,
      pollIntervalMs: 60_000, // a claim cut by bytes must not wait for it
      purgeIntervalMs: 0,
    });
    relays.push(relay);

    // Act
    relay.start();
    await waitFor('twelve publishes', () => publisher.messages.length === 12, 5000);
    await relay.stop();

    // Assert: four claims of 3 MiB, one after the other (the poll interval is a minute), then at most
    // claims that found nothing (stop() may come first); each row published once, whole.
    expect(claimedBytes.slice(0, 4)).toEqual([3 * MiB, 3 * MiB, 3 * MiB, 3 * MiB]);
    expect(claimedBytes.slice(4).every((bytes) => bytes === 0)).toBe(true);
    expect([...publisher.counts.values()]).toEqual(Array(12).fill(1));
    expect(publisher.messages.every((message) => message.payload.byteLength === MiB)).toBe(true);
  });

  it('ends a claim with the row that reaches maxBatchBytes, however large, and skips no row', async () => {
    // Arrange
    const table = 'outbox_batch_bytes_one';
    await migrateOutbox(db.pool, { schema: db.schema, table });
    await db.transaction(async (tx) => {
      for (const size of [10, 5000, 10]) {
        await enqueue(
          tx,
          { topic: 'bytes', payload: Buffer.alloc(size) },
          { schema: db.schema, table },
        );
      }
    });
    const source = postgresOutboxSource({ pool: db.pool, schema: db.schema, table, listen: false });

    // Act
    const sizes = [];
    for (let i = 0; i < 3; i++) {
      sizes.push((await source.claim(100, 60_000, 1000)).map((m) => m.payload.byteLength));
    }

    // Assert: the 5000-byte row starts under the budget, so it is taken, and ends the claim.
    expect(sizes).toEqual([[10, 5000], [10], []]);
  });
});

describe('relay (PostgreSQL): a row too large for node-postgres to read', () => {
  it('is claimed without its payload, the reason in last_error, and the rows around it are published', async () => {
    // Arrange: the real limit is 268,435,443 bytes (hex text past V8's string limit), too much for a
    // shared test machine; the claim statement takes the limit as $4, here 1000 bytes. Before, such a row
    // failed the whole claim after it had committed: its batch stayed claimed, and failed again after
    // every lease.
    const table = 'outbox_unreadable';
    await migrateOutbox(db.pool, { schema: db.schema, table });
    const ids = await db.transaction(async (tx) => {
      const out: string[] = [];
      for (const size of [10, 5000, 10]) {
        const { rowId } = await enqueue(
          tx,
          { topic: 'bytes', payload: Buffer.alloc(size) },
          { schema: db.schema, table },
        );
        out.push(rowId);
      }
      return out;
    });
    const claim = renderOutboxSql(postgresClaim, postgresOutboxNames(db.schema, table));

    // Act
    const { rows } = await db.pool.query(claim, [100, 60_000, null, 1000]);
    const stored = await db.pool.query(
      `SELECT id::text, attempts, last_error FROM "${db.schema}".${table} ORDER BY id`,
    );

    // Assert: every row claimed; the large one without its payload, and why in last_error.
    expect(
      rows
        .map((row) => [row.row_id, row.payload === null ? null : row.payload.length])
        .sort((a, b) => Number(a[0]) - Number(b[0])),
    ).toEqual([
      [ids[0], 10],
      [ids[1], null],
      [ids[2], 10],
    ]);
    expect(stored.rows.map((row) => [row.attempts, row.last_error])).toEqual([
      [1, null],
      [
        1,
        'payload of 5000 bytes, over the 1000 bytes node-postgres can read (bytea arrives as hex text): the relay cannot publish it; move the data elsewhere and delete the row',
      ],
      [1, null],
    ]);
  });
});

describe('relay (PostgreSQL): a mark that fails for good', () => {
  it('still records the round’s failed publishes with their backoff and reports them', async () => {
    // Arrange: every markSent statement fails (the database drops it), other statements go through.
    const table = 'outbox_mark_fails';
    await migrateOutbox(db.pool, { schema: db.schema, table });
    await db.transaction(async (tx) => {
      for (const topic of ['ok', 'bad']) {
        await enqueue(tx, { topic, payload: {} }, { schema: db.schema, table });
      }
    });
    const pool = {
      query: (text: string, values?: unknown[]) =>
        /SET sent_at = now\(\)/.test(text)
          ? Promise.reject(new Error('Connection terminated unexpectedly'))
          : db.pool.query(text, values),
    };
    const failed: string[] = [];
    const relay = createRelay({
      source: postgresOutboxSource({ pool, schema: db.schema, table, listen: false }),
      publisher: {
        async publish(message) {
          if (message.topic === 'bad') throw new Error('refused');
        },
      },
      backoff: () => 3_600_000,
      purgeIntervalMs: 0,
      onPublishFailed: (message) => failed.push(message.topic),
    });

    // Act: before, the round ended with the mark's error: the failure was neither recorded nor
    // reported, and the row came back after the 30 s lease instead of the hour's backoff.
    const round = relay.runOnce();

    // Assert
    await expect(round).rejects.toThrow(/markSent failed: Connection terminated unexpectedly/);
    expect(failed).toEqual(['bad']);
    const { rows } = await db.pool.query(
      `SELECT topic, last_error, available_at > now() + interval '30 minutes' AS backed_off
       FROM "${db.schema}".${table} ORDER BY id`,
    );
    expect(rows).toEqual([
      { topic: 'ok', last_error: null, backed_off: false },
      { topic: 'bad', last_error: 'Error: refused', backed_off: true },
    ]);
  });
});

describe('postgresOutboxSource with a pool of one connection', () => {
  it('refuses LISTEN (it would hold the only connection: claims wait forever, stop() hangs), and polls fine without it', async () => {
    const single = new pg.Pool({ connectionString: env.databaseUrl, max: 1 });
    single.on('error', () => {});
    try {
      expect(() => postgresOutboxSource({ pool: single, schema: db.schema })).toThrow(
        expect.toSatisfy(isInvalidOptionsErrorLike),
      );
      const publisher = recordingPublisher();
      const relay = createRelay({
        source: postgresOutboxSource({ pool: single, schema: db.schema, listen: false }),
        publisher,
        pollIntervalMs: 50,
        purgeIntervalMs: 0,
      });
      relay.start();
      const { messageId } = await db.transaction((tx) =>
        enqueue(tx, { topic: 'single-pool', payload: {} }, { schema: db.schema }),
      );
      await waitFor('the polled publish', () => publisher.counts.get(messageId) === 1, 10_000);
      await relay.stop();
    } finally {
      await single.end();
    }
  });
});

describe('relay (PostgreSQL)', () => {
  it('three relays running at once publish each of 1,000 rows once', async () => {
    const publisher = recordingPublisher({ delayMs: 1 });
    const ids: string[] = [];
    const three = [1, 2, 3].map(() => relayOf({ publisher, batchSize: 25 }));
    for (const relay of three) relay.start();
    // Enqueued while the relays run: 40 transactions of 25 rows.
    for (let t = 0; t < 40; t++) {
      const batch = await db.transaction(async (tx) => {
        const out: string[] = [];
        for (let i = 0; i < 25; i++) {
          out.push(
            (await enqueue(tx, { topic: 'storm', payload: { t, i } }, { schema: db.schema }))
              .messageId,
          );
        }
        return out;
      });
      ids.push(...batch);
    }
    await waitFor(
      '1,000 distinct publishes',
      () => ids.every((id) => publisher.counts.has(id)),
      60_000,
    );
    await Promise.all(three.map((relay) => relay.stop()));

    expect(ids.filter((id) => publisher.counts.get(id) !== 1)).toEqual([]);
    const unsent = (await db.rows()).filter(
      (row) => ids.includes(row.message_id) && row.sent_at === null,
    );
    expect(unsent).toEqual([]);
  });

  it('never skips a row whose transaction commits after rows with higher ids were published', async () => {
    const publisher = recordingPublisher();
    const relay = relayOf({ publisher, batchSize: 20 });
    relay.start();
    const ids: string[] = [];
    let overtaken = 0;
    // Long transactions take their ids first and commit last; short ones commit (and get published) meanwhile.
    const long = [400, 800, 1200, 1600].map((holdMs, n) =>
      db.transaction(async (tx) => {
        const { messageId, rowId } = await enqueue(
          tx,
          { topic: 'slow', payload: { n } },
          { schema: db.schema },
        );
        ids.push(messageId);
        await sleep(holdMs);
        if (publisher.messages.some((m) => BigInt(m.rowId) > BigInt(rowId))) overtaken++;
      }),
    );
    const short = (async () => {
      for (let i = 0; i < 60; i++) {
        const { messageId } = await db.transaction((tx) =>
          enqueue(tx, { topic: 'fast', payload: { i } }, { schema: db.schema }),
        );
        ids.push(messageId);
        await sleep(15);
      }
    })();
    await Promise.all([...long, short]);
    await waitFor('every row published', () => ids.every((id) => publisher.counts.has(id)), 30_000);
    await relay.stop();

    expect(overtaken).toBeGreaterThan(0); // the scenario really happened: commit order ≠ id order
    expect(ids.filter((id) => publisher.counts.get(id) !== 1)).toEqual([]);
  });

  it('retries a failing publish with backoff, recording attempts and the error, then publishes it; the row is never deleted', async () => {
    const publisher = recordingPublisher({ failTimes: 3 });
    const relay = relayOf({ publisher, backoff: { initialMs: 100, maxMs: 400, jitter: 0 } });
    const { messageId } = await db.transaction((tx) =>
      enqueue(tx, { topic: 'flaky', payload: 'x' }, { schema: db.schema }),
    );
    const row = async () => (await db.rows()).find((r) => r.message_id === messageId);

    // Act: first attempt fails; the row waits out its backoff before a claim sees it again.
    expect(await relay.runOnce()).toMatchObject({ claimed: 1, failed: 1 });
    expect(await relay.runOnce()).toMatchObject({ claimed: 0 });
    expect(await row()).toMatchObject({
      attempts: 1,
      sent_at: null,
      last_error: expect.stringContaining('broker down'),
    });
    await relay.purge();
    expect(await row()).toBeDefined();

    relay.start();
    await waitFor('the fourth attempt to succeed', () => publisher.counts.get(messageId) === 1);
    await relay.stop();
    expect(publisher.calls.get(messageId)).toBe(4);
    expect(await row()).toMatchObject({ attempts: 4, last_error: null, sent_at: expect.any(Date) });
  });

  it('reports a backoff function answering a delay past 100 years and waits the default backoff instead, the failure recorded', async () => {
    // Arrange: PostgreSQL's timestamps end in 294,276 AD; 1e20 ms from now is past them.
    const publisher = recordingPublisher({ failTimes: 1 });
    const errors: unknown[] = [];
    const relay = relayOf({ publisher, backoff: () => 1e20, onError: (e) => errors.push(e) });
    const { messageId } = await db.transaction((tx) =>
      enqueue(tx, { topic: 'far-backoff', payload: 'x' }, { schema: db.schema }),
    );
    // Act
    const round = await relay.runOnce();
    // Assert: the failure is marked (not an `interval out of range` from the store), and reported.
    expect(round).toMatchObject({ claimed: 1, failed: 1 });
    expect((await db.rows()).find((r) => r.message_id === messageId)).toMatchObject({
      attempts: 1,
      sent_at: null,
      last_error: expect.stringContaining('broker down'),
    });
    expect(errors).toContainEqual(
      expect.objectContaining({
        code: 'invalid_options',
        message:
          'createRelay: backoff(1) returned 100000000000000000000; using the default backoff',
      }),
    );
  });

  it('purges sent rows after the retention and keeps unsent ones, however old', async () => {
    const ok = recordingPublisher();
    const relay = relayOf({ publisher: ok, retentionMs: 300, purgeBatchSize: 2 });
    await relay.drain();
    const sent = await db.transaction((tx) =>
      enqueue(tx, { topic: 'old', payload: 1 }, { schema: db.schema }),
    );
    await relay.drain();
    const failing = relayOf({ publisher: recordingPublisher({ failTimes: 99 }), retentionMs: 300 });
    const unsent = await db.transaction((tx) =>
      enqueue(tx, { topic: 'stuck', payload: 2 }, { schema: db.schema }),
    );
    await failing.runOnce();
    await sleep(500);

    const purged = await relay.purge();

    expect(purged).toBeGreaterThanOrEqual(1);
    const ids = (await db.rows()).map((row) => row.message_id);
    expect(ids).not.toContain(sent.messageId);
    expect(ids).toContain(unsent.messageId);
    expect(await relay.stats()).toMatchObject({
      unsent: expect.any(Number),
      failing: expect.any(Number),
    });
    expect((await relay.stats()).unsent).toBeGreaterThanOrEqual(1);
  });

  it('is woken by NOTIFY at commit, long before its poll interval', async () => {
    const bus = createInProcessBus();
    const got: string[] = [];
    const off = bus.subscribe('notified', (m) => {
      got.push(m.id);
    });
    const relay = relayOf({ publisher: bus, pollIntervalMs: 60_000 });
    relay.start();
    await sleep(300); // LISTEN in place, first (empty) round done
    const { messageId } = await db.transaction((tx) =>
      enqueue(tx, { topic: 'notified', payload: {} }, { schema: db.schema }),
    );
    await waitFor('the notified publish', () => got.includes(messageId), 10_000);
    await relay.stop();
    off();
  });

  it('re-establishes LISTEN after its connection is killed, and reports the failure', async () => {
    const publisher = recordingPublisher();
    const errors: unknown[] = [];
    const relay = createRelay({
      source: postgresOutboxSource({ pool: db.pool, schema: db.schema, reconnectDelayMs: 100 }),
      publisher,
      pollIntervalMs: 60_000,
      purgeIntervalMs: 0,
      onError: (error) => errors.push(error),
    });
    relays.push(relay);
    relay.start();
    const listeners = () =>
      db.pool.query(
        `SELECT pid FROM pg_stat_activity WHERE query = $1 AND pid <> pg_backend_pid()`,
        [`LISTEN "${db.schema}.idempotency_outbox"`],
      );
    await waitFor('the LISTEN connection', async () => (await listeners()).rowCount === 1);
    const [{ pid }] = (await listeners()).rows as [{ pid: number }];

    await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    await waitFor('a new LISTEN connection', async () => {
      const { rows } = await listeners();
      return rows.length === 1 && rows[0].pid !== pid;
    });
    const { messageId } = await db.transaction((tx) =>
      enqueue(tx, { topic: 'after-reconnect', payload: {} }, { schema: db.schema }),
    );

    await waitFor(
      'the publish after reconnecting',
      () => publisher.counts.get(messageId) === 1,
      10_000,
    );
    await relay.stop();
    expect(errors.length).toBeGreaterThanOrEqual(1);
  });

  it('falls back to polling when notifications are off', async () => {
    const publisher = recordingPublisher();
    const relay = relayOf({ publisher, pollIntervalMs: 150 }, false);
    relay.start();
    await sleep(200);
    const { messageId } = await db.transaction((tx) =>
      enqueue(tx, { topic: 'polled', payload: {} }, { schema: db.schema }),
    );
    await waitFor('the polled publish', () => publisher.counts.get(messageId) === 1, 10_000);
    await relay.stop();
  });

  it('lets another relay take over rows whose claimer died, once the lease has passed', async () => {
    const { messageId } = await db.transaction((tx) =>
      enqueue(tx, { topic: 'orphan', payload: {} }, { schema: db.schema }),
    );
    const dead = postgresOutboxSource({ pool: db.pool, schema: db.schema, listen: false });
    const claimed = await dead.claim(100, 400); // claimed, never published nor marked
    expect(claimed.map((m) => m.id)).toContain(messageId);
    const publisher = recordingPublisher();
    const relay = relayOf({ publisher }, false);

    expect((await relay.runOnce()).claimed).toBe(0); // lease still running
    await sleep(600);
    await relay.drain();

    expect(publisher.counts.get(messageId)).toBe(1);
  });

  it('stops gracefully: the batch in flight is published and marked sent before stop() resolves', async () => {
    const publisher = recordingPublisher({ delayMs: 300 });
    const relay = relayOf({ publisher, concurrency: 5 });
    const ids = await db.transaction(async (tx) => {
      const out: string[] = [];
      for (let i = 0; i < 5; i++)
        out.push(
          (await enqueue(tx, { topic: 'graceful', payload: i }, { schema: db.schema })).messageId,
        );
      return out;
    });
    relay.start();
    await waitFor('publishes in flight', () => publisher.inFlight > 0);

    await relay.stop();

    expect(relay.running).toBe(false);
    expect(publisher.inFlight).toBe(0);
    const rows = (await db.rows()).filter((row) => ids.includes(row.message_id));
    expect(rows.every((row) => row.sent_at !== null)).toBe(true);
    expect(ids.every((id) => publisher.counts.get(id) === 1)).toBe(true);
  });
});
