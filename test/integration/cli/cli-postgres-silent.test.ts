/**
 * A PostgreSQL server that goes silent in the middle of a command (a network partition, a frozen primary):
 * the command line gives up after `--statement-timeout` and says that running it again is safe, instead
 * of waiting forever; `purge` also says how many records it had deleted by then. A proxy in front of the
 * real server stops forwarding once a given number of reply bytes has passed on the CLI's connection, so
 * the fault lands at the same point of the protocol whatever the machine's speed.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../../src/postgres/index.js';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';
import { env, requireService } from '../../helpers/env.js';
import { testPool, uniqueSchema } from '../../helpers/postgres-env.js';
import { startTcpProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';

const pool = testPool();
const schemas: string[] = [];

/** A migrated schema holding `expired` completed records whose retention ended a day ago. */
async function schemaWithExpired(label: string, expired: number): Promise<string> {
  const schema = uniqueSchema(label);
  schemas.push(schema);
  await migrate(pool, { schema });
  await pool.query(
    `INSERT INTO "${schema}".idempotency_records
       (key, status, fingerprint, token, attempt, outcome, created_at, completed_at, expires_at)
     SELECT md5(i::text) || md5((-i)::text), 'completed', 'f', i, 1, '\\x00',
       now() - interval '2 days', now() - interval '2 days', now() - interval '1 day'
     FROM generate_series(1, $1::int) AS i`,
    [expired],
  );
  return schema;
}

/**
 * How many bytes the server replies to open a connection as the CLI opens it (its `application_name` is
 * echoed back): the fault points below are counted from there, whatever the server's version or auth.
 */
async function handshakeBytes(): Promise<number> {
  const target = new URL(env.databaseUrl);
  let replied = 0;
  const proxy = await startTcpProxy(
    { host: target.hostname, port: Number(target.port || 5432) },
    { onReply: (bytes) => (replied = bytes) },
  );
  const url = new URL(env.databaseUrl);
  url.port = String(proxy.port);
  const client = new pg.Client({
    connectionString: url.toString(),
    application_name: 'idempotency-kit-cli',
  });
  try {
    await client.connect();
    return replied;
  } finally {
    await client.end();
    await proxy.close();
  }
}

/**
 * A proxy to the test server that stops answering once `bytes` of replies past the connection's
 * handshake have passed on a connection (1: right after the CLI's first query, `SELECT 1`, is answered).
 */
async function silencedAfter(bytes: number): Promise<{ proxy: TcpProxy; url: string }> {
  const target = new URL(env.databaseUrl);
  const threshold = (await handshakeBytes()) + bytes;
  let silenced = false;
  const proxy: TcpProxy = await startTcpProxy(
    { host: target.hostname, port: Number(target.port || 5432) },
    {
      onReply: (replied) => {
        if (silenced || replied < threshold) return;
        silenced = true;
        proxy.cut();
      },
    },
  );
  const url = new URL(env.databaseUrl);
  url.port = String(proxy.port);
  return { proxy, url: url.toString() };
}

beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
});

afterAll(async () => {
  for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

describe('a PostgreSQL server that goes silent mid-command', () => {
  it('purge gives up after --statement-timeout, saying how many records it deleted and to run it again', async () => {
    // Arrange: batches of 100 (a reply of some 60 bytes each); the link goes silent a few batches in
    const schema = await schemaWithExpired('clisilentpurge', 5_000);
    const { proxy, url } = await silencedAfter(400);
    try {
      // Act
      const started = performance.now();
      const run = await cli([
        'purge',
        '--database-url',
        url,
        '--schema',
        schema,
        '--limit',
        '100',
        '--statement-timeout',
        '1s',
      ]);
      const elapsed = performance.now() - started;
      // Assert: exit 1 in bounded time (without the bound it never returns: the child is killed at 60 s)
      expect(run.code, run.stderr).toBe(1);
      expect(elapsed).toBeLessThan(30_000);
      expect(run.stderr).toMatch(
        /^idempotency-kit purge failed: PostgreSQL store failed during purgeExpired: Query read timeout\n/,
      );
      expect(run.stderr).toMatch(/what it deleted stays deleted, .*: run it again\.\n$/);
      // The printed count is what was deleted: the batch that got no answer never reached the server.
      const { rows } = await pool.query(
        `SELECT count(*)::int AS left FROM "${schema}".idempotency_records`,
      );
      const purged = 5_000 - (rows[0] as { left: number }).left;
      expect(purged).toBeGreaterThan(0);
      expect(run.stdout).toBe(
        `purged ${purged} expired records in ${purged / 100} batches; batch ${purged / 100 + 1} failed\n`,
      );
    } finally {
      await proxy.close();
    }
  });

  it.each([['stats'], ['list', '--crashed'], ['inspect', 'ab'.repeat(32)]])(
    '%s gives up after --statement-timeout, saying to run it again',
    async (...command) => {
      // Arrange: silent once the CLI's first query (`SELECT 1`, on opening the store) has been answered
      const schema = await schemaWithExpired('clisilentread', 10);
      const { proxy, url } = await silencedAfter(1);
      try {
        // Act
        const started = performance.now();
        const run = await cli([
          ...command,
          '--database-url',
          url,
          '--schema',
          schema,
          '--statement-timeout',
          '1s',
        ]);
        const elapsed = performance.now() - started;
        // Assert
        expect(run.code, run.stderr).toBe(1);
        expect(elapsed).toBeLessThan(30_000);
        expect(run.stdout).toBe('');
        expect(run.stderr).toMatch(
          /^idempotency-kit \w+ failed: PostgreSQL store failed during \w+: Query read timeout\n/,
        );
        expect(run.stderr).toMatch(/changes nothing: run it again\.\n$/);
      } finally {
        await proxy.close();
      }
    },
  );

  it('health reports a probe that gets no answer after --timeout, and exits', async () => {
    // Arrange: the connection is up (its SELECT 1 answered), then the probe gets no answer
    const schema = await schemaWithExpired('clisilenthealth', 1);
    const { proxy, url } = await silencedAfter(1);
    try {
      // Act
      const started = performance.now();
      const run = await cli([
        'health',
        '--database-url',
        url,
        '--schema',
        schema,
        '--timeout',
        '1s',
      ]);
      const elapsed = performance.now() - started;
      // Assert: the verdict, and an exit (the hung probe once kept the process alive after printing it)
      expect(run.stdout).toMatch(
        /^unhealthy: .* timeout: the store did not answer within 1000 ms\n$/,
      );
      expect(run.code, run.stderr).toBe(1);
      expect(elapsed).toBeLessThan(30_000);
    } finally {
      await proxy.close();
    }
  });
});
