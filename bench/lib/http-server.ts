/**
 * Child process of `bench/http.ts`: one Express server (baseline, or behind the idempotency middleware on
 * one store), so the load generator and the server do not share an event loop. Configuration comes in
 * `IK_BENCH_HTTP` (JSON); the port goes back over IPC.
 */
import type { AddressInfo } from 'node:net';
import express from 'express';
import { idempotency } from '../../src/express/index.js';
import { memoryStore, type Store } from '../../src/index.js';

/** What the parent asks for. */
export interface BenchServerConfig {
  store: 'none' | 'memory' | 'sqlite' | 'redis' | 'postgres';
  delayMs: number;
  sqliteFile?: string;
  redisUrl?: string;
  redisPrefix?: string;
  databaseUrl?: string;
  pgSchema?: string;
}

const config = JSON.parse(process.env.IK_BENCH_HTTP ?? '{}') as BenchServerConfig;

async function createStore(): Promise<Store | undefined> {
  switch (config.store) {
    case 'none':
      return undefined;
    case 'memory':
      return memoryStore();
    case 'sqlite': {
      const { sqliteStore } = await import('../../src/sqlite/index.js');
      return sqliteStore({ database: config.sqliteFile!, synchronous: 'normal' });
    }
    case 'redis': {
      const { createClient } = await import('redis');
      const { redisStore } = await import('../../src/redis/index.js');
      const client = createClient({ url: config.redisUrl! });
      await client.connect();
      return redisStore({ client, prefix: config.redisPrefix!, checkEvictionPolicy: false });
    }
    case 'postgres': {
      const pg = (await import('pg')).default;
      const { postgresStore } = await import('../../src/postgres/index.js');
      const pool = new pg.Pool({ connectionString: config.databaseUrl!, max: 20 });
      return postgresStore({ pool, schema: config.pgSchema! });
    }
  }
}

const store = await createStore();
const app = express();
app.use(express.json());
if (store !== undefined) app.use(idempotency({ store }));
app.post('/orders', async (req, res) => {
  if (config.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, config.delayMs));
  res.status(201).json({ id: 'ord_123', amount: (req.body as { amount?: number }).amount ?? 0 });
});
const server = app.listen(0, '127.0.0.1', () => {
  process.send?.({ port: (server.address() as AddressInfo).port });
});
process.on('disconnect', () => process.exit(0));
