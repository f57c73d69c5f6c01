/**
 * Child process of the transactional crash test: starts a transactional run, stops at the configured
 * point mid-transaction, tells the parent where it is, and waits there to be killed with SIGKILL.
 */
import pg from 'pg';
import { postgresTransactional } from '../../src/postgres/index.js';

/** Where the child stops. */
export type CrashStage = 'after-claim' | 'after-writes' | 'before-commit';

interface CrashConfig {
  url: string;
  schema: string;
  key: string;
  stage: CrashStage;
  applicationName: string;
}

const config = JSON.parse(process.env.IK_CRASH_CONFIG ?? '{}') as CrashConfig;

// Report the stage, then hang forever: only a kill ends this process.
function stopHere(stage: CrashStage): Promise<never> {
  process.send?.(`at:${stage}`);
  setInterval(() => {}, 60_000);
  return new Promise<never>(() => {});
}

async function main(): Promise<void> {
  const pool = new pg.Pool({
    connectionString: config.url,
    max: 2,
    application_name: config.applicationName,
  });
  const transactional = postgresTransactional({ pool, schema: config.schema });
  await transactional.runInTransaction(
    { key: config.key, payload: { amount: 42 } },
    async (tx) => {
      if (config.stage === 'after-claim') await stopHere('after-claim');
      await tx.query(
        `INSERT INTO "${config.schema}".orders (idempotency_key, amount) VALUES ($1, 42)`,
        [config.key],
      );
      if (config.stage === 'after-writes') await stopHere('after-writes');
      return { amount: 42 };
    },
    {
      beforeCommit: async () => {
        if (config.stage === 'before-commit') await stopHere('before-commit');
      },
    },
  );
  process.send?.('finished');
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
