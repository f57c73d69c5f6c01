/**
 * Child of the WAL-switch test: opens the file in rollback-journal mode, takes the write lock with a
 * pending insert, says 'held', and commits after the number of ms it is given.
 * @module
 */
import Database from 'better-sqlite3';

const [file, holdMs] = process.argv.slice(2) as [string, string];
const db = new Database(file);
db.exec('BEGIN IMMEDIATE');
db.prepare('INSERT INTO filler (n) VALUES (1)').run();
process.send?.('held');
setTimeout(() => {
  db.exec('COMMIT');
  db.close();
  process.exit(0);
}, Number(holdMs));
