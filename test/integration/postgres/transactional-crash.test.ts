import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresStore, postgresTransactional } from '../../../src/postgres/index.js';
import { env } from '../../helpers/env.js';
import type { CrashStage } from '../../helpers/postgres-crash-child.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const child = fileURLToPath(new URL('../../helpers/postgres-crash-child.ts', import.meta.url));

beforeAll(async () => {
  fx = await setupPostgres('crash');
  await fx.pool.query(
    `CREATE TABLE "${fx.schema}".orders (id serial PRIMARY KEY, idempotency_key text NOT NULL, amount int NOT NULL)`,
  );
});

afterAll(async () => {
  await fx.dispose();
});

async function ordersFor(key: string): Promise<number> {
  const { rows } = await fx.pool.query(
    `SELECT count(*)::int AS n FROM "${fx.schema}".orders WHERE idempotency_key = $1`,
    [key],
  );
  return rows[0].n;
}

/** Start the child, wait until it reports `stage`, and kill -9 it there. */
async function killAt(
  stage: CrashStage,
  key: string,
  applicationName: string,
  beforeKill?: () => Promise<void>,
): Promise<void> {
  const proc = fork(child, [], {
    execArgv: ['--import', 'tsx'],
    env: {
      ...process.env,
      IK_CRASH_CONFIG: JSON.stringify({
        url: env.databaseUrl,
        schema: fx.schema,
        key,
        stage,
        applicationName,
      }),
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    proc.once('exit', (_, signal) => resolve(signal)),
  );
  const reached = await new Promise<string>((resolve, reject) => {
    proc.once('message', (message) => resolve(String(message)));
    proc.once('exit', (code) => reject(new Error(`crash child exited early with code ${code}`)));
  });
  expect(reached).toBe(`at:${stage}`);
  // The transaction really is open on the server at this point.
  const { rows } = await fx.pool.query(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle in transaction'",
    [applicationName],
  );
  expect(rows[0].n).toBe(1);
  await beforeKill?.();
  proc.kill('SIGKILL');
  expect(await exited).toBe('SIGKILL');
  // Wait until the server noticed the dead connection and rolled its transaction back.
  for (let i = 0; i < 200; i++) {
    const { rows: left } = await fx.pool.query(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1',
      [applicationName],
    );
    if (left[0].n === 0) return;
    await sleep(50);
  }
  throw new Error('the killed process’s backend never went away');
}

describe('transactional mode under kill -9', () => {
  for (const stage of ['after-claim', 'after-writes', 'before-commit'] as const) {
    it(`leaves neither record nor business rows when killed ${stage}, and a retry executes once`, async () => {
      const key = `crash-${stage}-${randomUUID()}`;
      const applicationName = `ik-crash-${randomUUID().slice(0, 8)}`;
      const transactional = postgresTransactional({ pool: fx.pool, schema: fx.schema });
      const store = postgresStore({ pool: fx.pool, schema: fx.schema });

      await killAt(stage, key, applicationName);

      expect(await store.get(transactional.storageKeyFor(key))).toBeUndefined();
      expect(await ordersFor(key)).toBe(0);

      let runs = 0;
      const handler = async (tx: { query: (t: string, v?: unknown[]) => Promise<unknown> }) => {
        runs++;
        await tx.query(
          `INSERT INTO "${fx.schema}".orders (idempotency_key, amount) VALUES ($1, 42)`,
          [key],
        );
        return { amount: 42 };
      };
      const retry = await transactional.runInTransaction({ key, payload: { amount: 42 } }, handler);
      expect(retry.status).toBe('executed');
      const again = await transactional.runInTransaction({ key, payload: { amount: 42 } }, handler);
      expect(again).toEqual({ status: 'replayed', value: { amount: 42 } });
      expect(runs).toBe(1);
      expect(await ordersFor(key)).toBe(1);
      expect((await store.get(transactional.storageKeyFor(key)))?.status).toBe('completed');
    });
  }

  it('lets a duplicate waiting on the killed transaction execute once the server rolls it back', async () => {
    const key = `crash-waiting-${randomUUID()}`;
    const applicationName = `ik-crash-${randomUUID().slice(0, 8)}`;
    const transactional = transactionalMode();
    let waiting: Promise<unknown> | undefined;
    let runs = 0;
    await killAt('after-writes', key, applicationName, async () => {
      // The duplicate blocks on the uncommitted claim of the process about to die.
      waiting = transactional.runInTransaction({ key, payload: { amount: 42 } }, async (tx) => {
        runs++;
        await tx.query(
          `INSERT INTO "${fx.schema}".orders (idempotency_key, amount) VALUES ($1, 42)`,
          [key],
        );
        return { amount: 42 };
      });
      for (let i = 0; i < 200; i++) {
        const { rows } = await fx.pool.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND position($1 in query) > 0",
          [fx.schema],
        );
        if (rows[0].n > 0) return;
        await sleep(20);
      }
      throw new Error('the duplicate never waited on the doomed transaction');
    });
    expect(await waiting).toMatchObject({ status: 'executed', value: { amount: 42 } });
    expect(runs).toBe(1);
    expect(await ordersFor(key)).toBe(1);
  });
});

function transactionalMode() {
  return postgresTransactional({ pool: fx.pool, schema: fx.schema });
}
