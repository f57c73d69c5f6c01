/**
 * A relay in a child process: opens the SQLite file it is given, waits for the parent's 'go', drains the
 * outbox with a recording publisher, and reports the message ids it published.
 * @module
 */
import Database from 'better-sqlite3';
import { createRelay, sqliteOutboxSource } from '../../../src/outbox/index.js';
import { recordingPublisher } from '../../helpers/outbox-recorder.js';

const file = process.argv[2];
if (file === undefined) throw new Error('usage: sqlite-relay-child <file>');
const db = new Database(file, { timeout: 10_000 });
const publisher = recordingPublisher({ delayMs: 1 });
const relay = createRelay({
  source: sqliteOutboxSource({ database: db }),
  publisher,
  batchSize: 20,
});

await new Promise<void>((resolve) => {
  process.once('message', () => resolve());
  process.send?.('ready');
});
await relay.drain();
db.close();
process.send?.(
  publisher.messages.map((m) => m.id),
  () => process.exit(0),
);
