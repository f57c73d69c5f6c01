/**
 * Child process of the transactional crash tests: runs one `runInTransaction` on the shared file and stops
 * at the configured point inside the open transaction. better-sqlite3 cannot yield there, so the child
 * signals the parent by writing a marker file synchronously, then blocks in `Atomics.wait`: forever
 * (`hang`, until the parent's SIGKILL) or for `pauseMs` before carrying on to COMMIT (`pause`).
 * Config: JSON in IK_SQLITE_TX_CONFIG.
 */
import { writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { enqueue } from '../../src/outbox/index.js';
import { sqliteTransactional } from '../../src/sqlite/index.js';

/** Where the child stops. */
export type SqliteCrashStage = 'after-claim' | 'after-writes' | 'before-commit';

/** What the parent passes in. */
export interface SqliteCrashConfig {
  file: string;
  key: string;
  stage: SqliteCrashStage;
  /** Written (synchronously) when the child reaches `stage`. */
  marker: string;
  /** `hang`: wait to be killed. `pause`: block `pauseMs`, then commit and exit 0. */
  mode: 'hang' | 'pause';
  pauseMs?: number;
}

const config = JSON.parse(process.env.IK_SQLITE_TX_CONFIG ?? '{}') as SqliteCrashConfig;
const blocker = new Int32Array(new SharedArrayBuffer(4));

function stopHere(stage: SqliteCrashStage): void {
  if (stage !== config.stage) return;
  writeFileSync(config.marker, stage);
  if (config.mode === 'pause') {
    Atomics.wait(blocker, 0, 0, config.pauseMs ?? 1000);
    return;
  }
  // Nothing ever notifies `blocker`: only a kill ends this.
  for (;;) Atomics.wait(blocker, 0, 0, 60_000);
}

const db = new Database(config.file, { timeout: 30_000 });
const transactional = sqliteTransactional({ database: db });
const insert = db.prepare('INSERT INTO payments (idempotency_key, amount) VALUES (?, 42)');
const outcome = transactional.runInTransactionSync(
  { key: config.key, payload: { amount: 42 } },
  (tx) => {
    stopHere('after-claim');
    insert.run(config.key);
    enqueue(tx.database, { topic: 'payment.initiated', key: config.key, payload: { amount: 42 } });
    stopHere('after-writes');
    return { amount: 42, by: 'child' };
  },
  { beforeCommit: () => stopHere('before-commit') },
);
db.close();
if (outcome.status !== 'executed') throw new Error(`child ${outcome.status}`);
