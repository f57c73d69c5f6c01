/**
 * The transactional mode under a real `kill -9` of a child process stopped inside the open transaction
 * (after the claim, after the business and outbox writes, after the completion right before COMMIT): the
 * file keeps neither the record nor the rows, and a retry executes exactly once. Also: a duplicate that
 * arrives while another process's transaction is open waits for the write lock, then replays.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { migrateOutbox } from '../../../src/outbox/index.js';
import { sqliteStore, sqliteTransactional } from '../../../src/sqlite/index.js';
import type { SqliteCrashConfig, SqliteCrashStage } from '../../helpers/sqlite-tx-crash-child.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-tx-crash-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});
const childScript = fileURLToPath(
  new URL('../../helpers/sqlite-tx-crash-child.ts', import.meta.url),
);
let files = 0;

function freshFile(): string {
  const file = join(dir, `crash-${++files}.db`);
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.exec(
    'CREATE TABLE payments (id INTEGER PRIMARY KEY, idempotency_key TEXT NOT NULL, amount INTEGER NOT NULL)',
  );
  migrateOutbox(db);
  db.close();
  return file;
}

/** Fork the child and resolve once it has written its marker (it is then inside the transaction). */
async function startChild(config: Omit<SqliteCrashConfig, 'marker'>) {
  const marker = join(dir, `marker-${files}-${config.stage}-${config.mode}`);
  const child = fork(childScript, [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, IK_SQLITE_TX_CONFIG: JSON.stringify({ ...config, marker }) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.push(child);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  for (let i = 0; !existsSync(marker); i++) {
    if (child.exitCode !== null) throw new Error(`child exited early with ${child.exitCode}`);
    if (i > 1200) throw new Error(`child never reached ${config.stage}`);
    await sleep(25);
  }
  return { child, exited };
}

/** True when another connection holds the file's write lock (a transaction is open in the child). */
function writeLocked(file: string): boolean {
  const probe = new Database(file, { timeout: 0 });
  try {
    probe.exec('BEGIN IMMEDIATE');
    probe.exec('ROLLBACK');
    return false;
  } catch (error) {
    if ((error as { code?: string }).code === 'SQLITE_BUSY') return true;
    throw error;
  } finally {
    probe.close();
  }
}

function count(db: Database.Database, sql: string, key: string): number {
  return (db.prepare(sql).get(key) as { n: number }).n;
}

describe('sqliteTransactional under kill -9', () => {
  for (const stage of ['after-claim', 'after-writes', 'before-commit'] as const) {
    it(`leaves neither record nor business or outbox rows when killed ${stage}, and a retry executes once`, async () => {
      // Arrange
      const file = freshFile();
      const key = `crash-${stage}`;
      const { child, exited } = await startChild({ file, key, stage, mode: 'hang' });
      expect(writeLocked(file)).toBe(true);
      // Act
      child.kill('SIGKILL');
      expect((await exited).signal).toBe('SIGKILL');
      const db = new Database(file, { timeout: 10_000 });
      const transactional = sqliteTransactional({ database: db });
      const store = sqliteStore({ database: db });
      const leftRecord = await store.get(transactional.storageKeyFor(key));
      const leftRows = count(
        db,
        'SELECT count(*) AS n FROM payments WHERE idempotency_key = ?',
        key,
      );
      const leftOutbox = count(
        db,
        'SELECT count(*) AS n FROM idempotency_outbox WHERE message_key = ?',
        key,
      );
      let runs = 0;
      const retry = (stageName: SqliteCrashStage | 'retry') =>
        transactional.runInTransaction({ key, payload: { amount: 42 } }, () => {
          runs++;
          db.prepare('INSERT INTO payments (idempotency_key, amount) VALUES (?, 42)').run(key);
          return { amount: 42, by: stageName };
        });
      const first = await retry('retry');
      const again = await retry('retry');
      // Assert
      expect(leftRecord).toBeUndefined();
      expect(leftRows).toBe(0);
      expect(leftOutbox).toBe(0);
      expect(first.status).toBe('executed');
      expect(again).toEqual({ status: 'replayed', value: { amount: 42, by: 'retry' } });
      expect(runs).toBe(1);
      expect(count(db, 'SELECT count(*) AS n FROM payments WHERE idempotency_key = ?', key)).toBe(
        1,
      );
      expect((await store.get(transactional.storageKeyFor(key)))?.status).toBe('completed');
      db.close();
    });
  }

  it('makes a duplicate wait for another process’s open transaction, then replay its outcome', async () => {
    // Arrange
    const file = freshFile();
    const key = 'waits';
    const { exited } = await startChild({
      file,
      key,
      stage: 'before-commit',
      mode: 'pause',
      pauseMs: 2000,
    });
    // The child is inside its transaction, holding the write lock, for about two more seconds.
    expect(writeLocked(file)).toBe(true);
    const db = new Database(file, { timeout: 30_000 });
    const transactional = sqliteTransactional({ database: db });
    let runs = 0;
    // Act: blocks this process (better-sqlite3 is synchronous) until the child commits.
    const outcome = transactional.runInTransactionSync({ key, payload: { amount: 42 } }, () => {
      runs++;
      return { amount: 42, by: 'parent' };
    });
    // Assert
    expect((await exited).code).toBe(0);
    expect(outcome).toEqual({ status: 'replayed', value: { amount: 42, by: 'child' } });
    expect(runs).toBe(0);
    expect(count(db, 'SELECT count(*) AS n FROM payments WHERE idempotency_key = ?', key)).toBe(1);
    db.close();
  });
});
