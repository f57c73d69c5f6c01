/**
 * Child of the WAL-size test: opens the file, starts a read transaction and holds its snapshot (which keeps
 * checkpoints from copying anything written after it), says 'reading', and ends it when told to.
 * @module
 */
import Database from 'better-sqlite3';

const [file] = process.argv.slice(2) as [string];
const db = new Database(file);
db.exec('BEGIN');
db.prepare('SELECT count(*) FROM idempotency_records').get();
process.once('message', () => {
  db.exec('COMMIT');
  db.close();
  process.exit(0);
});
process.send?.('reading');
