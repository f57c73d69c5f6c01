/**
 * What the CLI says when a command cannot run: a bad `--prefix` or `--table` is a usage error (exit 2) that
 * leaves nothing open, a store that never answered is a connection failure (exit 1), and only a store that
 * went away after answering gets the "run it again" hint (cli-interrupted.test.ts covers that one).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';
import { env, requireService } from '../../helpers/env.js';
import { uniqueSchema } from '../../helpers/postgres-env.js';

const dir = mkdtempSync(join(tmpdir(), 'ik-cli-failures-'));
// A port nothing listens on: a refused connection.
let refusedPort: number;

beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
  await requireService('Redis', env.redisUrl);
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  refusedPort = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** `env.databaseUrl` with `change` applied. */
function databaseUrl(change: (url: URL) => void): string {
  const url = new URL(env.databaseUrl);
  change(url);
  return url.toString();
}

describe('a Redis prefix the store refuses', () => {
  it('is a usage error (exit 2) that exits at once, for both client libraries and for health', async () => {
    // Act: before the fix, the connected client was never closed and the process never exited
    const runs = await Promise.all(
      (['node-redis', 'ioredis'] as const).flatMap((library) =>
        ['stats', 'health'].map(async (command) => {
          const args = [command, '--redis-url', env.redisUrl, '--redis-client', library];
          const run = await cli([...args, '--prefix', 'orders{']);
          return { run, label: `${command} ${library}` };
        }),
      ),
    );
    // Assert
    for (const { run, label } of runs) {
      expect(run.code, label).toBe(2);
      expect(run.stdout, label).toBe('');
      expect(run.stderr, label).toMatch(/failed: redisStore: `prefix` must be a string without/);
    }
  }, 30_000);
});

describe('a SQLite --table', () => {
  it('that is not a table name is a usage error (exit 2), for stats and health', async () => {
    // Arrange
    const file = join(dir, 'names.db');
    expect((await cli(['migrate', '--sqlite', file])).code).toBe(0);
    // Act
    const stats = await cli(['stats', '--sqlite', file, '--table', 'bad-name']);
    const health = await cli(['health', '--sqlite', file, '--table', 'bad-name']);
    // Assert
    for (const run of [stats, health]) {
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/failed: sqliteStore: table must match/);
      expect(run.stderr).not.toMatch(/migrate/);
    }
  });

  it('that is missing fails at open, saying to migrate, and not that the store stopped answering', async () => {
    // Arrange
    const file = join(dir, 'missing-table.db');
    expect((await cli(['migrate', '--sqlite', file])).code).toBe(0);
    // Act
    const run = await cli(['stats', '--sqlite', file, '--table', 'missing_table']);
    // Assert
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `cannot read missing_table in ${file} (run \`idempotency-kit migrate --sqlite ${file} --table missing_table\` first?)`,
    );
    expect(run.stderr).not.toMatch(/stopped answering|run it again/);
  });
});

describe('a PostgreSQL server that never answered', () => {
  it.each([
    [
      'a refused connection',
      () => databaseUrl((url) => (url.port = String(refusedPort))),
      /ECONNREFUSED/,
    ],
    [
      'a missing database',
      () => databaseUrl((url) => (url.pathname = '/ik_no_such_database')),
      /database "ik_no_such_database" does not exist/,
    ],
  ])('%s fails at open, without the hint for an interrupted command', async (_what, url, cause) => {
    for (const command of ['stats', 'migrate']) {
      // Act
      const run = await cli([command, '--database-url', url(), '--timeout', '2s']);
      // Assert
      expect(run.code, command).toBe(1);
      expect(run.stderr, command).toMatch(
        new RegExp(
          `^idempotency-kit ${command} failed: cannot connect to PostgreSQL at [^:]+:\\d+/\\w+: `,
        ),
      );
      expect(run.stderr, command).toMatch(cause);
      expect(run.stderr, command).not.toMatch(/stopped answering|changes nothing|run it again/);
    }
  });

  it('is told apart from an answer: a schema not migrated names the fix, not an interruption', async () => {
    // Act
    const run = await cli([
      'stats',
      '--database-url',
      env.databaseUrl,
      '--schema',
      uniqueSchema('nomig'),
    ]);
    // Assert
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /does not exist \(run migrate\(\) or `idempotency-kit migrate` first\)/,
    );
    expect(run.stderr).not.toMatch(/stopped answering|run it again/);
  });
});
