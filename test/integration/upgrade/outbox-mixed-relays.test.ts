/**
 * Rolling deploy, outbox: relays of the previous release and of this one share a table for as long as the
 * deploy lasts, with no migration between them (the table is the same).
 *
 * - Rows enqueued by the previous release (captured as literal rows) are published by this release's
 *   relay as they were enqueued: id, topic, key, payload, content type, headers.
 * - The previous release's relay records a failed publish without this release's attempt fence (its
 *   `markFailed` statement, quoted below as it shipped). Both relays publishing with a flaky broker on one
 *   table: every row ends sent and every message is published, none lost, whichever relay claimed,
 *   failed, or took over a row. (What the fence adds, no late failure record cutting another relay's lease
 *   short, holds once every relay runs this release: an older one's late record can still bring a row back
 *   early, a duplicate publish with the same id at most, as before.)
 */
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createRelay,
  decodePayload,
  migrateOutbox,
  type OutboxMessage,
  type OutboxSource,
  type Publisher,
  postgresOutboxSource,
  sqliteOutboxSource,
} from '../../../src/outbox/index.js';
import { type OutboxDatabase, openOutboxDatabase } from '../../helpers/outbox-postgres.js';
import { waitUntil } from '../../helpers/wait-until.js';

/** The rows the release at e4e5dd8 wrote for three `enqueue` calls (PostgreSQL and SQLite alike). */
const E4E5DD8_ROWS = [
  {
    message_id: '88f38508-99af-4d61-97e9-cbad60c5ab8d',
    topic: 'orders.created',
    message_key: 'order-42',
    payload:
      '7b226f726465724964223a34322c22616d6f756e74223a2231302e3030222c226974656d73223a5b7b22736b75223a22c3a9222c226e223a327d5d7d',
    content_type: 'application/json',
    headers: '{"x-tenant": "t1", "traceparent": "00-abc-def-01"}',
  },
  {
    message_id: '4f93adb3-c302-4d9a-a10a-1086df93d177',
    topic: 'orders.note',
    message_key: null,
    payload: '706c61696e207465787420e29c93',
    content_type: 'text/plain; charset=utf-8',
    headers: '{}',
  },
  {
    message_id: '920f6c41-0b70-4ec9-aac2-fae9db873d19',
    topic: 'orders.bytes',
    message_key: 'order-44',
    payload: '0001feff',
    content_type: 'application/octet-stream',
    headers: '{}',
  },
];

/** What this release must publish for them. */
const EXPECTED = [
  {
    id: '88f38508-99af-4d61-97e9-cbad60c5ab8d',
    topic: 'orders.created',
    key: 'order-42',
    headers: { 'x-tenant': 't1', traceparent: '00-abc-def-01' },
    payload: { orderId: 42, amount: '10.00', items: [{ sku: 'é', n: 2 }] },
  },
  {
    id: '4f93adb3-c302-4d9a-a10a-1086df93d177',
    topic: 'orders.note',
    key: null,
    headers: {},
    payload: 'plain text ✓',
  },
  {
    id: '920f6c41-0b70-4ec9-aac2-fae9db873d19',
    topic: 'orders.bytes',
    key: 'order-44',
    headers: {},
    payload: '0001feff',
  },
];

/** e4e5dd8's `postgres-mark-failed.sql` and `sqlite-mark-failed.sql`: no attempt fence. */
const E4E5DD8_MARK_FAILED = {
  postgres: (table: string) =>
    `UPDATE ${table} SET available_at = now() + $2 * interval '1 millisecond', last_error = $3 WHERE id = $1 AND sent_at IS NULL`,
  sqlite: (table: string) =>
    `UPDATE ${table} SET available_at = @available_at, last_error = @error WHERE id = @id AND sent_at IS NULL`,
};

const view = (message: OutboxMessage) => ({
  id: message.id,
  topic: message.topic,
  key: message.key,
  headers: message.headers,
  // Bytes as hex: the decoded form of bytes is a Buffer, which does not compare equal to a Uint8Array.
  payload:
    message.contentType === 'application/octet-stream'
      ? Buffer.from(message.payload).toString('hex')
      : decodePayload(message),
});

/** A publisher that fails about a third of its publishes, after a pause, and records the others. */
function flakyPublisher(published: string[]): Publisher {
  return {
    async publish(message) {
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 20));
      if (Math.random() < 0.35) throw new Error('broker said no');
      published.push(message.id);
    },
  };
}

/** Runs one relay of each release on `source`/`oldSource` until every row is sent. */
async function relayBoth(
  source: OutboxSource,
  oldSource: OutboxSource,
  unsent: () => Promise<number>,
): Promise<string[]> {
  const published: string[] = [];
  const options = {
    publisher: flakyPublisher(published),
    // Short leases and backoffs: rows change hands between the relays many times.
    leaseMs: 200,
    publishTimeoutMs: 150,
    batchSize: 4,
    pollIntervalMs: 10,
    purgeIntervalMs: 0,
    backoff: { initialMs: 5, maxMs: 20 },
  };
  const relays = [
    createRelay({ source, ...options }),
    createRelay({ source: oldSource, ...options }),
  ];
  for (const relay of relays) relay.start();
  try {
    await waitUntil('every row to be sent', async () => (await unsent()) === 0, 30_000, 50);
  } finally {
    await Promise.all(relays.map((relay) => relay.stop()));
  }
  return published;
}

describe('PostgreSQL', () => {
  let database: OutboxDatabase;
  let table: string;
  beforeAll(async () => {
    database = await openOutboxDatabase(8);
    table = `"${database.schema}".idempotency_outbox`;
  });
  afterAll(() => database?.close());

  const source = () =>
    postgresOutboxSource({ pool: database.pool, schema: database.schema, listen: false });
  // The previous release's relay: this source with that release's failure record.
  const oldSource = (): OutboxSource => {
    const current = source();
    return {
      ...current,
      async markFailed(rowId, retryInMs, error) {
        await database.pool.query(E4E5DD8_MARK_FAILED.postgres(table), [
          rowId,
          Math.ceil(retryInMs),
          error,
        ]);
      },
    };
  };
  const unsent = async () =>
    Number(
      (await database.pool.query(`SELECT count(*) FROM ${table} WHERE sent_at IS NULL`)).rows[0]
        .count,
    );

  it("rows enqueued by e4e5dd8 are published by this release's relay as enqueued", async () => {
    // Arrange
    for (const row of E4E5DD8_ROWS) {
      await database.pool.query(
        `INSERT INTO ${table} (message_id, topic, message_key, payload, content_type, headers)
         VALUES ($1, $2, $3, decode($4, 'hex'), $5, $6::jsonb)`,
        [row.message_id, row.topic, row.message_key, row.payload, row.content_type, row.headers],
      );
    }
    const published: OutboxMessage[] = [];
    const relay = createRelay({
      source: source(),
      publisher: { publish: async (m) => void published.push(m) },
    });
    // Act
    await relay.runOnce();
    // Assert
    expect(published.map(view)).toEqual(EXPECTED);
    expect(await unsent()).toBe(0);
  });

  it('relays of e4e5dd8 and of this release on one table, with a flaky broker: every row sent, none lost', async () => {
    // Arrange
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) {
      const id = `mixed-${randomBytes(6).toString('hex')}`;
      ids.push(id);
      await database.pool.query(
        `INSERT INTO ${table} (message_id, topic, payload, content_type) VALUES ($1, 't', '\\x7b7d', 'application/json')`,
        [id],
      );
    }
    // Act
    const published = await relayBoth(source(), oldSource(), unsent);
    // Assert
    expect(new Set(published)).toEqual(new Set(ids));
  });
});

describe('SQLite', () => {
  let db: Database.Database;
  beforeAll(() => {
    db = new Database(':memory:');
    migrateOutbox(db);
  });
  afterAll(() => db?.close());

  const source = () => sqliteOutboxSource({ database: db });
  const oldSource = (): OutboxSource => {
    const current = source();
    const statement = db.prepare(E4E5DD8_MARK_FAILED.sqlite('idempotency_outbox'));
    return {
      ...current,
      async markFailed(rowId, retryInMs, error) {
        statement.run({
          id: Number(rowId),
          available_at: Date.now() + Math.ceil(retryInMs),
          error,
        });
      },
    };
  };
  const unsent = async () =>
    (
      db.prepare('SELECT count(*) AS n FROM idempotency_outbox WHERE sent_at IS NULL').get() as {
        n: number;
      }
    ).n;

  it("rows enqueued by e4e5dd8 are published by this release's relay as enqueued", async () => {
    // Arrange
    const insert = db.prepare(
      `INSERT INTO idempotency_outbox (message_id, topic, message_key, payload, content_type, headers,
         created_at, available_at) VALUES (@message_id, @topic, @message_key, unhex(@payload), @content_type,
         @headers, @now, @now)`,
    );
    for (const row of E4E5DD8_ROWS) {
      // SQLite kept the headers as compact JSON text.
      insert.run({ ...row, headers: JSON.stringify(JSON.parse(row.headers)), now: Date.now() });
    }
    const published: OutboxMessage[] = [];
    const relay = createRelay({
      source: source(),
      publisher: { publish: async (m) => void published.push(m) },
    });
    // Act
    await relay.runOnce();
    // Assert
    expect(published.map(view)).toEqual(EXPECTED);
    expect(await unsent()).toBe(0);
  });

  it('relays of e4e5dd8 and of this release on one table, with a flaky broker: every row sent, none lost', async () => {
    // Arrange
    const ids: string[] = [];
    const insert = db.prepare(
      `INSERT INTO idempotency_outbox (message_id, topic, payload, content_type, created_at, available_at)
       VALUES (?, 't', x'7b7d', 'application/json', ?, ?)`,
    );
    for (let i = 0; i < 60; i++) {
      const id = `mixed-${randomBytes(6).toString('hex')}`;
      ids.push(id);
      insert.run(id, Date.now(), Date.now());
    }
    // Act
    const published = await relayBoth(source(), oldSource(), unsent);
    // Assert
    expect(new Set(published)).toEqual(new Set(ids));
  });
});
