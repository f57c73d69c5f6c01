/**
 * `idempotency-kit health`, and the connection bound every command now has: a healthy store exits 0, an
 * unreachable or silent one exits 1 with the reason in bounded time (node-redis used to retry a refused
 * connection forever, so `stats` against a wrong port never returned).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';
import { env, requireService } from '../../helpers/env.js';
import { testPool, uniqueSchema } from '../../helpers/postgres-env.js';

const dir = mkdtempSync(join(tmpdir(), 'ik-cli-health-'));
const pool = testPool();
const schema = uniqueSchema('clihealth');
// A server that accepts connections and never says a word: what a hung Redis or PostgreSQL looks like.
let silent: Server;
const held: Socket[] = [];
let silentPort: number;
// A port nothing listens on: a refused connection.
let refusedPort: number;

beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
  silent = createServer((socket) => held.push(socket));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  silentPort = (silent.address() as AddressInfo).port;
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  refusedPort = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
});

afterAll(async () => {
  for (const socket of held) socket.destroy();
  await new Promise<void>((resolve) => silent.close(() => resolve()));
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
  rmSync(dir, { recursive: true, force: true });
});

describe('idempotency-kit health on reachable stores', () => {
  it('exits 0 for Redis with either client library, and reports the probe as JSON', async () => {
    for (const library of ['node-redis', 'ioredis']) {
      // Act
      const run = await cli(['health', '--redis-url', env.redisUrl, '--redis-client', library]);
      const json = await cli([
        'health',
        '--json',
        '--redis-url',
        env.redisUrl,
        '--redis-client',
        library,
      ]);
      // Assert
      expect(run, library).toMatchObject({ code: 0, stderr: '' });
      expect(run.stdout).toMatch(
        /^healthy: redis prefix idem: \(redis\) answered the probe in [\d.]+ ms\n$/,
      );
      expect(json.code).toBe(0);
      expect(JSON.parse(json.stdout)).toMatchObject({
        ok: true,
        store: 'redis',
        target: 'redis prefix idem:',
      });
    }
  });

  it('exits 0 for a migrated PostgreSQL schema and 1, naming the fix, for one not migrated', async () => {
    // Arrange
    const notMigrated = await cli([
      'health',
      '--database-url',
      env.databaseUrl,
      '--schema',
      schema,
    ]);
    expect(
      (await cli(['migrate', '--database-url', env.databaseUrl, '--schema', schema])).code,
    ).toBe(0);
    // Act
    const migrated = await cli(['health', '--database-url', env.databaseUrl, '--schema', schema]);
    // Assert
    expect(notMigrated.code).toBe(1);
    expect(notMigrated.stdout).toMatch(/^unhealthy: .*\(postgres\) after [\d.]+ ms: .*migrate/);
    expect(migrated).toMatchObject({ code: 0, stderr: '' });
    expect(migrated.stdout).toMatch(
      new RegExp(`^healthy: ${schema}\\.idempotency_records \\(postgres\\)`),
    );
  });

  it('exits 0 for a migrated SQLite file and 1 for a missing one', async () => {
    // Arrange
    const file = join(dir, `${randomUUID()}.db`);
    expect((await cli(['migrate', '--sqlite', file])).code).toBe(0);
    // Act
    const healthy = await cli(['health', '--sqlite', file]);
    const missing = await cli(['health', '--json', '--sqlite', join(dir, 'missing.db')]);
    // Assert
    expect(healthy).toMatchObject({ code: 0, stderr: '' });
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.stdout)).toMatchObject({
      ok: false,
      store: 'sqlite',
      error: { code: 'store_unavailable', message: expect.stringMatching(/no such file/) },
    });
  });
});

describe('idempotency-kit on unreachable stores: an answer in bounded time', () => {
  it('health exits 1 at once for a refused Redis connection, with either client library', async () => {
    for (const library of ['node-redis', 'ioredis']) {
      // Act
      const run = await cli([
        'health',
        '--json',
        '--redis-url',
        `redis://127.0.0.1:${refusedPort}`,
        '--redis-client',
        library,
      ]);
      // Assert
      expect(run.code, library).toBe(1);
      expect(JSON.parse(run.stdout)).toMatchObject({
        ok: false,
        store: 'redis',
        target: 'redis prefix idem:',
        error: {
          code: 'store_unavailable',
          message: `cannot connect to Redis at 127.0.0.1:${refusedPort}: connect ECONNREFUSED 127.0.0.1:${refusedPort}`,
        },
      });
    }
  });

  it('stats fails instead of waiting forever on a refused Redis connection (node-redis retried it)', async () => {
    // Act
    const run = await cli([
      'stats',
      '--redis-url',
      `redis://127.0.0.1:${refusedPort}`,
      '--redis-client',
      'node-redis',
    ]);
    // Assert
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /stats failed: cannot connect to Redis at 127\.0\.0\.1:\d+: connect ECONNREFUSED/,
    );
  });

  it('health and stats give up on a server that never answers after --timeout', async () => {
    const commands = [
      ['health', '--redis-url', `redis://127.0.0.1:${silentPort}`, '--redis-client', 'node-redis'],
      ['health', '--redis-url', `redis://127.0.0.1:${silentPort}`, '--redis-client', 'ioredis'],
      ['stats', '--redis-url', `redis://127.0.0.1:${silentPort}`],
      ['health', '--database-url', `postgres://postgres@127.0.0.1:${silentPort}/test`],
      ['stats', '--database-url', `postgres://postgres@127.0.0.1:${silentPort}/test`],
    ];
    // Act: the runs mostly wait out their --timeout, so they wait together; each is timed on its own.
    const runs = await Promise.all(
      commands.map(async (args) => {
        const started = performance.now();
        const run = await cli([...args, '--timeout', '700ms']);
        return { args, run, elapsed: performance.now() - started };
      }),
    );
    for (const { args, run, elapsed } of runs) {
      // Assert: the child's own start takes up to a few seconds on a loaded machine; without the bound it
      // never returns
      expect(run.code, args.join(' ')).toBe(1);
      expect(`${run.stdout}${run.stderr}`, args.join(' ')).toMatch(/within 700 ms|timeout/i);
      expect(elapsed, args.join(' ')).toBeLessThan(15_000);
    }
  });
});
