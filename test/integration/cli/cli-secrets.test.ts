/**
 * The CLI never prints the password a store URL holds (docs/cli.md: `--redis-url` and `--database-url` are
 * "never printed"), whatever is wrong with the URL: a scheme a client library reads as a socket path or a
 * host name, a refused connection, a wrong password.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';
import { env, requireService } from '../../helpers/env.js';

const SECRET = 'S3cretPassw0rd';

beforeAll(async () => {
  await requireService('Redis', env.redisUrl);
  await requireService('PostgreSQL', env.databaseUrl);
});

/** `env.redisUrl`'s host and port. */
const redisHost = () => new URL(env.redisUrl).host;

describe('a --redis-url that is not a redis: or rediss: URL', () => {
  // ioredis takes such a string for a Unix socket path (or a host name), and its connection error quoted
  // it whole: "connect ENOENT //user:S3cretPassw0rd@127.0.0.1:6379".
  const urls = [
    `valkey://user:${SECRET}@${redisHost()}`,
    `http://user:${SECRET}@${redisHost()}`,
    `user:${SECRET}@${redisHost()}`,
    `//user:${SECRET}@${redisHost()}`,
    SECRET,
  ];

  it('is a usage error (exit 2) that names the option and never prints the URL, with either client', async () => {
    // Act
    const runs = await Promise.all(
      (['ioredis', 'node-redis'] as const).flatMap((library) =>
        urls.flatMap((url) =>
          ['stats', 'health'].map(async (command) => ({
            label: `${command} ${library} ${url.replace(SECRET, '<secret>')}`,
            run: await cli([command, '--redis-url', url, '--redis-client', library]),
          })),
        ),
      ),
    );
    // Assert
    for (const { label, run } of runs) {
      expect(`${run.stdout}${run.stderr}`, label).not.toContain(SECRET);
      expect(run.code, label).toBe(2);
      expect(run.stderr, label).toMatch(/--redis-url: expected a redis:\/\/ or rediss:\/\/ URL/);
    }
  }, 60_000);

  it('accepts the scheme in any case, as URLs do', async () => {
    // Act
    const run = await cli([
      'stats',
      '--redis-url',
      env.redisUrl.replace(/^redis:/, 'REDIS:'),
      '--redis-client',
      'ioredis',
      '--prefix',
      `cli-secrets-${process.pid}:`,
    ]);
    // Assert
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
  });
});

describe('a store URL with a password that fails to connect', () => {
  it('names the server, never the password (Redis: both clients; PostgreSQL)', async () => {
    // Arrange: a wrong password, and a port nothing listens on
    const redisWrong = `redis://nobody:${SECRET}@${redisHost()}`;
    const redisRefused = `redis://nobody:${SECRET}@127.0.0.1:1`;
    const database = new URL(env.databaseUrl);
    database.username = 'nobody';
    database.password = SECRET;
    const refusedDatabase = new URL(database);
    refusedDatabase.port = '1';
    // Act
    const runs = await Promise.all([
      ...(['ioredis', 'node-redis'] as const).flatMap((library) =>
        [redisWrong, redisRefused].map((url) =>
          cli(['stats', '--redis-url', url, '--redis-client', library]),
        ),
      ),
      cli(['stats', '--database-url', database.toString()]),
      cli(['health', '--database-url', refusedDatabase.toString()]),
      cli(['stats'], { DATABASE_URL: database.toString() }),
    ]);
    // Assert
    for (const run of runs) {
      expect(`${run.stdout}${run.stderr}`).not.toContain(SECRET);
      expect(run.code).toBe(1);
    }
  }, 60_000);
});
