import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
