/**
 * The SQLite transactional mode: the idempotency record, the payment row and the outbox message commit in
 * one transaction on your connection, so a crash leaves all of them or none. The second call with the same
 * key replays; a handler that throws rolls everything back; the engine (`run()` on a `sqliteStore` of the
 * same file) sees the same records.
 * Run: npx tsx examples/sqlite-transactional.ts (in your code, import from `idempotency-kit`,
 * `idempotency-kit/sqlite` and `idempotency-kit/outbox`)
 * @module
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createIdempotency } from '../src/index.js';
import { enqueue, migrateOutbox } from '../src/outbox/index.js';
import { sqliteStore, sqliteTransactional } from '../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-example-'));

// Your connection: the handler writes through it, so the record must live on it too.
const db = new Database(join(dir, 'app.db')); // busy timeout 5 s by default
db.pragma('journal_mode = WAL');
db.exec(`CREATE TABLE IF NOT EXISTS payments (
  id INTEGER PRIMARY KEY, idempotency_key TEXT NOT NULL UNIQUE, amount INTEGER NOT NULL)`);
migrateOutbox(db);
const transactional = sqliteTransactional({ database: db, retentionMs: '24h' });
const insertPayment = db.prepare('INSERT INTO payments (idempotency_key, amount) VALUES (?, ?)');

// The handler is synchronous: a better-sqlite3 transaction cannot stay open across an await.
function createPayment(key: string, amount: number) {
  return transactional.runInTransaction({ key, payload: { amount } }, (tx) => {
    const { lastInsertRowid } = insertPayment.run(key, amount);
    const id = Number(lastInsertRowid);
    enqueue(tx.database, { topic: 'payment.initiated', key: String(id), payload: { id, amount } });
    // The provider call happens later, in the worker, with this key so the provider deduplicates too.
    return { id, amount, chargeKey: tx.downstreamKey('charge') };
  });
}

for (const attempt of [1, 2]) {
  const outcome = await createPayment('pay-1001', 4200);
  switch (outcome.status) {
    case 'executed':
      console.log(`attempt ${attempt}: executed`, outcome.value, `(token ${outcome.token})`);
      break;
    case 'replayed':
      console.log(`attempt ${attempt}: replayed`, outcome.value);
      break;
    case 'in_progress':
      console.log(`attempt ${attempt}: in progress, retry in ${outcome.retryAfterMs} ms`);
      break;
    case 'mismatch':
      console.log(`attempt ${attempt}: same key, different payload`);
      break;
  }
}

// Same key, another amount: misuse is reported, nothing runs.
console.log('other amount:', (await createPayment('pay-1001', 999)).status);

// A throw rolls back the record, the row and the message: the key stays free for a retry.
try {
  await transactional.runInTransaction({ key: 'pay-1002', payload: { amount: 1 } }, () => {
    insertPayment.run('pay-1002', 1);
    throw new Error('validation failed after the insert');
  });
} catch (error) {
  console.log('rolled back:', (error as Error).message);
}
console.log('after the rollback:', (await createPayment('pay-1002', 1)).status);

// The engine on the same file and table shares the records (same namespace, here 'default').
const store = sqliteStore({ database: db });
const idempotency = createIdempotency({ store });
const viaEngine = await idempotency.run({ key: 'pay-1001', payload: { amount: 4200 } }, () => {
  throw new Error('never runs: the key was completed in transactional mode');
});
console.log('engine:', viaEngine.status);

const counts = db
  .prepare(
    'SELECT (SELECT count(*) FROM payments) AS payments, (SELECT count(*) FROM idempotency_outbox) AS messages',
  )
  .get();
console.log('rows:', counts);

db.close();
rmSync(dir, { recursive: true, force: true });
