import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isInvalidOptionsError } from '../../../src/core/errors.js';
import {
  createInProcessBus,
  createRelay,
  decodePayload,
  enqueue,
  migrateOutbox,
  type Relay,
  sqliteOutboxSource,
} from '../../../src/outbox/index.js';
import { type SqliteTransactionContext, sqliteTransactional } from '../../../src/sqlite/index.js';
import { recordingPublisher, waitFor } from '../../helpers/outbox-recorder.js';

let dir: string;
let file: string;
let db: Database.Database;
const relays: Relay[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'outbox-sqlite-'));
  file = join(dir, 'app.db');
  db = new Database(file, { timeout: 5000 });
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE payments (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)');
  migrateOutbox(db);
});

afterAll(async () => {
  await Promise.all(relays.map((relay) => relay.stop()));
  db?.close();
  rmSync(dir, { recursive: true, force: true });
});

const rows = () =>
  db
    .prepare('SELECT message_id, attempts, last_error, sent_at FROM idempotency_outbox ORDER BY id')
    .all() as Array<{
    message_id: string;
    attempts: number;
    last_error: string | null;
    sent_at: number | null;
  }>;

function relayOf(
  options: Partial<Parameters<typeof createRelay>[0]> &
    Pick<Parameters<typeof createRelay>[0], 'publisher'>,
  database = db,
) {
  const relay = createRelay({
    source: sqliteOutboxSource({ database }),
    pollIntervalMs: 200,
    purgeIntervalMs: 0,
    ...options,
  });
  relays.push(relay);
  return relay;
}

describe('outbox on SQLite', () => {
  it('migrates once (a second call applies nothing)', () => {
    expect(migrateOutbox(db).applied).toEqual([]);
  });

  it('leaves no row when the transaction rolls back, and publishes a committed one once with its stable id', async () => {
    const publisher = recordingPublisher();
    const relay = relayOf({ publisher });
    expect(() =>
      db.transaction(() => {
        db.prepare('INSERT INTO payments VALUES (?, ?)').run('p-0', 5);
        enqueue(db, { topic: 'payment.initiated', payload: { id: 'p-0' } });
        throw new Error('business failure');
      })(),
    ).toThrow('business failure');
    const result = db.transaction(() => {
      db.prepare('INSERT INTO payments VALUES (?, ?)').run('p-1', 10);
      return enqueue(db, {
        topic: 'payment.initiated',
        key: 'p-1',
        payload: { id: 'p-1' },
        messageId: 'idem-p-1',
      });
    })();

    await relay.drain();

    expect(result).toMatchObject({ messageId: 'idem-p-1', duplicate: false });
    expect(publisher.messages.map((m) => [m.id, m.key, decodePayload(m)])).toEqual([
      ['idem-p-1', 'p-1', { id: 'p-1' }],
    ]);
    expect(rows()).toEqual([
      expect.objectContaining({ message_id: 'idem-p-1', attempts: 1, sent_at: expect.any(Number) }),
    ]);
  });

  it('refuses to enqueue outside a transaction', () => {
    expect(() => enqueue(db, { topic: 't', payload: 1 })).toThrow(
      expect.toSatisfy(isInvalidOptionsError),
    );
  });

  it('refuses a key with half an emoji, which SQLite would store as U+FFFD so that a retry no longer matched', () => {
    // Arrange: a key cut by UTF-16 length. Before, it was stored replaced, and the retried enqueue of the
    // same message id was refused as "a different topic, key or payload".
    const message = {
      topic: 'guest.invited',
      key: 'Zoë 🎉 party'.slice(0, 5),
      payload: 1,
      messageId: `invite-sqlite-${Date.now()}`,
    };
    const before = rows().length;
    const enqueueOnce = () => db.transaction(() => enqueue(db, message))();

    // Act / Assert: the caller's error, naming the cause, and nothing stored.
    expect(enqueueOnce).toThrow(
      expect.objectContaining({
        code: 'invalid_options',
        message: expect.stringMatching(
          /key must be well-formed Unicode: it contains a lone surrogate/,
        ),
      }),
    );
    expect(rows().length).toBe(before);
  });

  it('refuses a payload over maxPayloadBytes (128 MiB by default) inside the transaction, naming the size and the limit', () => {
    // Arrange: before, any size was committed, and a row the broker refuses (NATS: max_payload) failed
    // every publish for ever. SQLite reads blobs as bytes, so only the option limits it here.
    const before = rows().length;
    const enqueueOnce = (payload: Buffer, options: { maxPayloadBytes?: number } = {}) =>
      db.transaction(() => enqueue(db, { topic: 'big', payload }, options))();

    // Act / Assert
    expect(() => enqueueOnce(Buffer.alloc(1025), { maxPayloadBytes: 1024 })).toThrow(
      expect.objectContaining({
        code: 'invalid_options',
        message: expect.stringMatching(/payload is 1025 bytes, over maxPayloadBytes \(1024\)/),
      }),
    );
    expect(() => enqueueOnce(Buffer.allocUnsafe(128 * 1024 * 1024 + 1))).toThrow(
      expect.objectContaining({
        code: 'invalid_options',
        message: expect.stringMatching(
          /payload is 134217729 bytes, over maxPayloadBytes \(134217728\)/,
        ),
      }),
    );
    expect(rows().length).toBe(before);
    enqueueOnce(Buffer.alloc(1024), { maxPayloadBytes: 1024 });
    expect(rows().length).toBe(before + 1);
  });

  it('ends a claim with the row that reaches the byte budget (maxBatchBytes), skipping no row', async () => {
    // Arrange: before, a claim took every available row up to batchSize, whatever their size.
    const table = 'outbox_batch_bytes';
    migrateOutbox(db, { table });
    db.transaction(() => {
      for (const size of [600, 600, 5000, 10, 10]) {
        enqueue(db, { topic: 'bytes', payload: Buffer.alloc(size) }, { table });
      }
    })();
    const source = sqliteOutboxSource({ database: db, table });

    // Act
    const sizes: number[][] = [];
    for (let i = 0; i < 4; i++) {
      sizes.push((await source.claim(100, 60_000, 1000)).map((m) => m.payload.byteLength));
    }

    // Assert: 600 + 600 reaches 1000; then 5000 alone (it starts the claim); then the rest.
    expect(sizes).toEqual([[600, 600], [5000], [10, 10], []]);
  });

  it('hands claimed rows back for a stopping relay, only while no other claim took them since', async () => {
    // Arrange: a row claimed by a relay whose lease then ran out, and claimed again by another.
    const { messageId } = db.transaction(() => enqueue(db, { topic: 'handed.back', payload: 1 }))();
    let now = Date.now();
    const clock = { now: () => now };
    const first = sqliteOutboxSource({ database: db, clock });
    const second = sqliteOutboxSource({ database: db, clock });
    const [mine] = (await first.claim(100, 1000)).filter((m) => m.id === messageId);
    now += 2000;
    const [theirs] = (await second.claim(100, 1000)).filter((m) => m.id === messageId);

    // Act / Assert: the first relay's hand-back changes nothing (its attempt is stale)…
    await first.release?.([{ rowId: mine!.rowId, attempt: mine!.attempt }]);
    expect((await first.claim(100, 1000)).map((m) => m.id)).not.toContain(messageId);
    // …while the current claimer's makes the row claimable at once, its attempt still counted.
    await second.release?.([{ rowId: theirs!.rowId, attempt: theirs!.attempt }]);
    const [again] = (await first.claim(100, 1000)).filter((m) => m.id === messageId);
    expect(again?.attempt).toBe(3);
    await first.markSent([again!.rowId]);
  });

  it('wakes an embedded relay on the same connection at once, and the in-process bus delivers to the worker', async () => {
    const bus = createInProcessBus();
    const seen: unknown[] = [];
    bus.subscribe('order.placed', (message) => {
      seen.push(decodePayload(message));
    });
    const relay = relayOf({ publisher: bus, pollIntervalMs: 60_000 });
    relay.start();
    await sleep(100);
    db.transaction(() => enqueue(db, { topic: 'order.placed', payload: 'o-1' }))();
    await waitFor('the in-process delivery', () => seen.length === 1, 10_000);
    await relay.stop();
    expect(seen).toEqual(['o-1']);
  });

  it('two relays on separate connections publish each of 1,000 rows once', async () => {
    const other = new Database(file, { timeout: 5000 });
    const publisher = recordingPublisher({ delayMs: 1 });
    const two = [
      relayOf({ publisher, batchSize: 50 }),
      relayOf({ publisher, batchSize: 50 }, other),
    ];
    for (const relay of two) relay.start();
    const ids: string[] = [];
    for (let t = 0; t < 20; t++) {
      ids.push(
        ...db.transaction(() =>
          Array.from(
            { length: 50 },
            (_, i) => enqueue(db, { topic: 'storm', payload: { t, i } }).messageId,
          ),
        )(),
      );
      await sleep(5);
    }
    await waitFor('1,000 publishes', () => ids.every((id) => publisher.counts.has(id)), 60_000);
    await Promise.all(two.map((relay) => relay.stop()));
    other.close();
    expect(ids.filter((id) => publisher.counts.get(id) !== 1)).toEqual([]);
  });

  it('retries a failing publish with backoff and keeps the row until it is sent; purges it only after the retention', async () => {
    const publisher = recordingPublisher({ failTimes: 2 });
    const relay = relayOf({ publisher, backoff: { initialMs: 50, jitter: 0 }, retentionMs: 200 });
    const { messageId } = db.transaction(() =>
      enqueue(db, { topic: 'flaky', payload: new Uint8Array([1, 2, 3]) }),
    )();
    const row = () => rows().find((r) => r.message_id === messageId);

    await relay.runOnce();
    await relay.purge();
    expect(row()).toMatchObject({
      attempts: 1,
      sent_at: null,
      last_error: expect.stringContaining('broker down'),
    });
    relay.start();
    await waitFor('the third attempt', () => publisher.counts.get(messageId) === 1);
    await relay.stop();
    expect(row()).toMatchObject({ attempts: 3, last_error: null, sent_at: expect.any(Number) });
    expect([...(decodePayload(publisher.messages.at(-1)!) as Uint8Array)]).toEqual([1, 2, 3]);

    await sleep(300);
    await relay.purge();
    expect(row()).toBeUndefined();
  });
});

describe('outbox on SQLite, sharing the connection with an async transaction', () => {
  it('does not mark rows sent inside a transaction someone else holds open across an await (its rollback would re-publish them)', async () => {
    // Arrange: a query builder with async transactions (e.g. Kysely on better-sqlite3) opens BEGIN on the
    // relay's connection while a publish is in flight, and rolls back a little later.
    const shared = new Database(join(dir, 'shared.db'));
    migrateOutbox(shared);
    const { messageId } = shared.transaction(() =>
      enqueue(shared, { topic: 'shared', payload: 1 }),
    )();
    const publisher = recordingPublisher();
    const relay = createRelay({
      source: sqliteOutboxSource({ database: shared }),
      publisher: {
        async publish(message) {
          await publisher.publish(message);
          if (publisher.calls.get(message.id) !== 1) return;
          shared.exec('BEGIN');
          setTimeout(() => shared.exec('ROLLBACK'), 100);
        },
      },
      leaseMs: 1000,
      publishTimeoutMs: 500,
      purgeIntervalMs: 0,
    });

    try {
      // Act
      const first = await relay.runOnce();
      await sleep(1100); // past the ROLLBACK and the lease
      const second = await relay.runOnce();

      // Assert
      expect(first).toMatchObject({ claimed: 1, published: 1 });
      expect(second.claimed).toBe(0);
      expect(publisher.counts.get(messageId)).toBe(1);
      expect(
        shared
          .prepare('SELECT sent_at FROM idempotency_outbox WHERE message_id = ?')
          .get(messageId),
      ).toEqual({ sent_at: expect.any(Number) });
    } finally {
      shared.close();
    }
  });
});

describe('outbox on SQLite, an application that keeps a transaction open most of the time', () => {
  it('marks the published rows without waiting for a gap between its transactions, and none is published twice', async () => {
    // Arrange: the application runs async transactions back to back on the relay's connection (each
    // awaits I/O, the next begins at once), from the first publish on, for about 600 ms.
    const shared = new Database(join(dir, 'busy.db'));
    migrateOutbox(shared);
    shared.exec('CREATE TABLE app_rows (n INTEGER)');
    const ids = shared.transaction(() =>
      [1, 2, 3].map((n) => enqueue(shared, { topic: 'busy', payload: n }).messageId),
    )();
    const publisher = recordingPublisher();
    let app: Promise<void> | undefined;
    const appLoop = async () => {
      const until = Date.now() + 600;
      for (let n = 0; Date.now() < until; n++) {
        shared.exec('BEGIN');
        shared.prepare('INSERT INTO app_rows (n) VALUES (?)').run(n);
        await sleep(10);
        // Every third one rolls back, taking a mark made inside it along.
        shared.exec(n % 3 === 2 ? 'ROLLBACK' : 'COMMIT');
      }
    };
    const relay = createRelay({
      source: sqliteOutboxSource({ database: shared }),
      publisher: {
        async publish(message) {
          app ??= appLoop();
          await publisher.publish(message);
        },
      },
      leaseMs: 1000,
      publishTimeoutMs: 500,
      purgeIntervalMs: 0,
      concurrency: 1,
    });

    try {
      // Act: a round while the application is busy, then the next rounds once it is done.
      const startedAt = Date.now();
      const first = await relay.runOnce();
      const firstMs = Date.now() - startedAt;
      await app;
      await sleep(1100); // past the lease
      const later = await relay.runOnce();

      // Assert: the round did not wait for a quiet moment, every row is sent, and each went out once.
      expect(first).toMatchObject({ claimed: 3, published: 3 });
      expect(firstMs).toBeLessThan(400); // the application keeps going for 600 ms
      expect(later.claimed).toBe(0);
      for (const id of ids) expect(publisher.counts.get(id)).toBe(1);
      expect(
        shared
          .prepare('SELECT count(*) AS unsent FROM idempotency_outbox WHERE sent_at IS NULL')
          .get(),
      ).toEqual({ unsent: 0 });
    } finally {
      shared.close();
    }
  });
});

describe('outbox on SQLite, relays in several processes', () => {
  it('three relay processes claiming in IMMEDIATE transactions publish each of 600 rows once', async () => {
    const ids = db.transaction(() =>
      Array.from({ length: 600 }, (_, i) => enqueue(db, { topic: 'multi', payload: i }).messageId),
    )();
    const script = fileURLToPath(new URL('./sqlite-relay-child.ts', import.meta.url));
    const children = [1, 2, 3].map(() =>
      fork(script, [file], {
        execArgv: ['--import', 'tsx'],
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      }),
    );
    try {
      await Promise.all(
        children.map((child) => new Promise((resolve) => child.once('message', resolve))),
      );
      const reports = children.map(
        (child) =>
          new Promise<string[]>((resolve, reject) => {
            child.once('message', (message) => resolve(message as string[]));
            child.once('exit', (code) => reject(new Error(`relay child exited with ${code}`)));
          }),
      );
      for (const child of children) child.send('go');
      const perChild = await Promise.all(reports);
      const published = perChild.flat();

      const counts = new Map<string, number>();
      for (const id of published) counts.set(id, (counts.get(id) ?? 0) + 1);
      expect(ids.filter((id) => counts.get(id) !== 1)).toEqual([]);
      expect(perChild.filter((list) => list.length > 0).length).toBeGreaterThan(1); // they did overlap
      expect(rows().filter((row) => ids.includes(row.message_id) && row.sent_at === null)).toEqual(
        [],
      );
    } finally {
      for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});

describe('enqueue with the SQLite transactional mode', () => {
  it('commits the record, the payment and the message together; a retried request enqueues nothing new', async () => {
    const transactional = sqliteTransactional({ database: db });
    const key = `pay-${Date.now()}`;
    const handler = (tx: SqliteTransactionContext) => {
      tx.database
        .prepare('INSERT INTO payments VALUES (@id, @amount)')
        .run({ id: key, amount: 700 });
      return enqueue(tx.database, {
        topic: 'payment.initiated',
        key,
        payload: { key },
        messageId: tx.downstreamKey('payment.initiated'),
      });
    };

    const first = transactional.runInTransactionSync({ key, payload: { amount: 700 } }, handler);
    const retry = transactional.runInTransactionSync({ key, payload: { amount: 700 } }, handler);
    expect(() =>
      transactional.runInTransactionSync({ key: `${key}-declined`, payload: {} }, (tx) => {
        enqueue(tx.database, {
          topic: 'payment.initiated',
          payload: 'declined',
          messageId: `${key}-declined`,
        });
        throw new Error('card declined');
      }),
    ).toThrow('card declined');

    expect(first.status).toBe('executed');
    expect(retry).toEqual({
      status: 'replayed',
      value: first.status === 'executed' ? first.value : undefined,
    });
    const ids = rows().map((row) => row.message_id);
    expect(
      ids.filter((id) => id === (first.status === 'executed' ? first.value.messageId : '')),
    ).toHaveLength(1);
    expect(ids).not.toContain(`${key}-declined`);
  });
});
