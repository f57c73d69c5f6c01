import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createRelay,
  enqueue,
  migrateOutbox,
  type OutboxMessage,
  sqliteOutboxSource,
} from '../../../src/outbox/index.js';

// Row ids past Number.MAX_SAFE_INTEGER: 2^53 and 2^53 + 1 are the same JavaScript number, so an id that went
// through one marked the other row. Reachable with a raised sqlite_sequence or rows inserted with large ids.
const TWO_TO_53 = 2n ** 53n;
const ids = [TWO_TO_53, TWO_TO_53 + 1n, TWO_TO_53 + 2n, TWO_TO_53 + 3n].map(String);

let dir: string;
let db: Database.Database;
let table = 0;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'outbox-sqlite-large-ids-'));
  db = new Database(join(dir, 'app.db'), { timeout: 5000 });
  db.pragma('journal_mode = WAL');
});

afterAll(() => {
  db?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A fresh outbox table whose next AUTOINCREMENT id is 2^53. */
function tableNearTwoTo53(): string {
  const name = `outbox_large_ids_${++table}`;
  migrateOutbox(db, { table: name });
  db.prepare('INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)').run(name, TWO_TO_53 - 1n);
  return name;
}

function enqueueFour(name: string): string[] {
  return db.transaction(() =>
    ['a', 'b', 'c', 'd'].map(
      (id) => enqueue(db, { topic: 't', payload: { id }, messageId: id }, { table: name }).rowId,
    ),
  )();
}

/** Message id → sent, read with exact integers (the test's own view of the table). */
function sentById(name: string): Record<string, boolean> {
  const statement = db.prepare(`SELECT message_id, sent_at FROM ${name} ORDER BY id`);
  const rows = statement.all() as Array<{ message_id: string; sent_at: number | null }>;
  return Object.fromEntries(rows.map((row) => [row.message_id, row.sent_at !== null]));
}

describe('outbox on SQLite, row ids above 2^53', () => {
  it('returns exact row ids from enqueue and claim, and marks exactly the rows named', async () => {
    const name = tableNearTwoTo53();
    expect(enqueueFour(name)).toEqual(ids);
    // The same message again: the duplicate reports the existing row's exact id.
    const again = db.transaction(() =>
      enqueue(db, { topic: 't', payload: { id: 'b' }, messageId: 'b' }, { table: name }),
    )();
    expect(again).toEqual({ messageId: 'b', rowId: ids[1], duplicate: true });

    const source = sqliteOutboxSource({ database: db, table: name });
    const claimed = await source.claim(10, 60_000);
    expect(claimed.map((message) => [message.id, message.rowId])).toEqual([
      ['a', ids[0]],
      ['b', ids[1]],
      ['c', ids[2]],
      ['d', ids[3]],
    ]);

    expect(await source.markSent([ids[1]!])).toBe(1);
    expect(sentById(name)).toEqual({ a: false, b: true, c: false, d: false });

    // A failure recorded for d (2^53 + 3) must not land on c (2^53 + 2, where the lossy id rounds to).
    await source.markFailed(ids[3]!, 60_000, 'refused', claimed[3]!.attempt);
    const errors = db.prepare(`SELECT message_id, last_error FROM ${name} ORDER BY id`).all();
    expect(errors).toEqual([
      { message_id: 'a', last_error: null },
      { message_id: 'b', last_error: null },
      { message_id: 'c', last_error: null },
      { message_id: 'd', last_error: 'refused' },
    ]);

    // Handing d back makes d claimable again, not c.
    await source.release?.([{ rowId: ids[3]!, attempt: claimed[3]!.attempt }]);
    expect((await source.claim(10, 60_000)).map((message) => message.id)).toEqual(['d']);
  });

  it('a relay never marks a message sent that its publisher refused (it would never be published)', async () => {
    const name = tableNearTwoTo53();
    enqueueFour(name);
    // `a` (2^53) is refused, `b` (2^53 + 1) goes through: marking b by a rounded id marked a instead.
    const published: string[] = [];
    const relay = createRelay({
      source: sqliteOutboxSource({ database: db, table: name }),
      publisher: {
        async publish(message: OutboxMessage) {
          if (message.id === 'a') throw new Error('refused by the broker');
          published.push(message.id);
        },
      },
      purgeIntervalMs: 0,
      backoff: { initialMs: 60_000, maxMs: 60_000 },
    });
    await relay.drain();
    expect(published).toEqual(['b', 'c', 'd']);
    expect(sentById(name)).toEqual({ a: false, b: true, c: true, d: true });
    const refused = db.prepare(`SELECT last_error FROM ${name} WHERE message_id = 'a'`).get();
    expect(refused).toEqual({ last_error: expect.stringContaining('refused by the broker') });
  });
});
