/**
 * The stores several OS processes can share (a SQLite file, Redis, PostgreSQL), as cross-process tests
 * open them: each process imports `storeModule` and calls its `createStore(storeArgument)` to get a store
 * of its own on the same records.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { env, requireService } from './env.js';
import { type PostgresFixture, setupPostgres } from './postgres-env.js';
import { connectClient, deleteKeys } from './redis-clients.js';

/** A test helper module's absolute path (what a child process imports). */
export const helperPath = (name: string): string =>
  fileURLToPath(new URL(`./${name}`, import.meta.url));

/** One shared store: how to make it ready for a test file, and how to clean up after it. */
export interface SharedStoreBackend {
  name: 'sqlite' | 'redis' | 'postgres';
  /** Prepare the store; what each process needs to open it. */
  setup(): Promise<{ storeModule: string; storeArgument: unknown }>;
  /** Remove what the test file left (the file, the keys under its prefix, the schema). */
  teardown(): Promise<void>;
}

/** The three shared stores, each in a place of its own named after `label` (a file, a prefix, a schema). */
export function sharedStoreBackends(label: string): SharedStoreBackend[] {
  const sqliteDir = mkdtempSync(join(tmpdir(), `ik-${label}-`));
  const redisPrefix = `idemtest:${label}:${randomUUID().slice(0, 8)}:`;
  let pgFixture: PostgresFixture | undefined;
  return [
    {
      name: 'sqlite',
      setup: async () => ({
        storeModule: helperPath('../integration/sqlite/store-factory.ts'),
        storeArgument: join(sqliteDir, 'shared.db'),
      }),
      teardown: async () => rmSync(sqliteDir, { recursive: true, force: true }),
    },
    {
      name: 'redis',
      setup: async () => {
        await requireService('Redis', env.redisUrl);
        return {
          storeModule: helperPath('redis-clients.ts'),
          storeArgument: { lib: 'node-redis', url: env.redisUrl, prefix: redisPrefix },
        };
      },
      teardown: async () => {
        const { client, close } = await connectClient('node-redis', env.redisUrl);
        await deleteKeys(client, redisPrefix);
        await close();
      },
    },
    {
      name: 'postgres',
      setup: async () => {
        pgFixture = await setupPostgres(label.replace(/\W/g, '_'));
        return {
          storeModule: helperPath('postgres-store-factory.ts'),
          storeArgument: { schema: pgFixture.schema },
        };
      },
      teardown: async () => pgFixture?.dispose(),
    },
  ];
}
