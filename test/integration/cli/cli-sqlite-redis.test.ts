/**
 * The CLI on the SQLite and Redis stores: `inspect` shows a crashed request's key (reserved for it, with its
 * recorded step) that `get()` hides, `stats` counts it, and the commands that do not apply are refused.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { redisStore } from '../../../src/redis/index.js';
import { sqliteStore } from '../../../src/sqlite/index.js';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';
import { crashAfterCharge } from '../../helpers/crashed-request.js';
import { env } from '../../helpers/env.js';
import { redisForFile } from '../../helpers/redis-file-connection.js';

const dir = mkdtempSync(join(tmpdir(), 'ik-cli-'));
const prefix = `ik-test:cli:${randomUUID().slice(0, 8)}:`;
const redis = redisForFile('node-redis', prefix);

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function expectCrashed(stdout: string, storageKey: string) {
  expect(stdout).toMatch(new RegExp(`^${storageKey}: crashed\\n`));
  expect(stdout).toMatch(/reserved {5}for its own request until .*\(in 23 h 59 min\)/);
  expect(stdout).toMatch(/HTTP 422 key_mismatch/);
  expect(stdout).toMatch(/steps {8}charge \(\d+ bytes\)/);
}

describe('idempotency-kit on SQLite', () => {
  it('migrates a new file, then inspects a crashed key, counts it, and purges around it', async () => {
    const file = join(dir, 'orders.db');
    const migrated = await cli(['migrate', '--sqlite', file]);
    expect(migrated).toMatchObject({ code: 0, stderr: '' });
    expect(migrated.stdout).toMatch(/applied 0001_records, 0002_reservations_and_steps/);
    expect((await cli(['migrate', '--sqlite', file])).stdout).toMatch(/is up to date/);

    const store = sqliteStore({ database: file });
    try {
      const { storageKey } = await crashAfterCharge(store);
      expect(await store.get(storageKey)).toBeUndefined();
      const inspected = await cli(['inspect', storageKey, '--sqlite', file]);
      expect(inspected).toMatchObject({ code: 0, stderr: '' });
      expectCrashed(inspected.stdout, storageKey);

      const stats = JSON.parse((await cli(['stats', '--json', '--sqlite', file])).stdout) as Record<
        string,
        unknown
      >;
      expect(stats).toMatchObject({ store: 'sqlite', inProgress: 0, staleLeases: 1 });
      // The reserved dead lease is not purged: it still answers another request with 422.
      const purged = await cli(['purge', '--sqlite', file]);
      expect(purged.stdout).toMatch(/purged 0 expired records in 1 batch\b/);
      expect((await cli(['inspect', storageKey, '--sqlite', file])).stdout).toMatch(/: crashed\n/);
    } finally {
      await store.close();
    }
  });

  it('refuses a file that does not exist instead of creating it', async () => {
    const file = join(dir, 'typo.db');
    const run = await cli(['stats', '--sqlite', file]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/no such file/);
    const second = await cli(['inspect', 'f'.repeat(64), '--sqlite', file]);
    expect(second.code).toBe(1);
  });
});

describe('idempotency-kit on Redis', () => {
  it('inspects a crashed key under the store’s prefix, and counts it', async () => {
    const store = redisStore({ client: redis.client, prefix, checkEvictionPolicy: false });
    const { idempotency, storageKey } = await crashAfterCharge(store);
    expect(await idempotency.run({ key: 'other', payload: 1 }, () => 1)).toMatchObject({
      status: 'executed',
    });
    const inspected = await cli([
      'inspect',
      storageKey,
      '--redis-url',
      env.redisUrl,
      '--prefix',
      prefix,
    ]);
    expect(inspected).toMatchObject({ code: 0, stderr: '' });
    expectCrashed(inspected.stdout, storageKey);
    // Under another prefix the key is absent: the prefix is part of where a record lives.
    const elsewhere = await cli(['inspect', storageKey, '--redis-url', env.redisUrl]);
    expect(elsewhere.stdout).toMatch(/: absent/);

    const stats = JSON.parse(
      (await cli(['stats', '--json', '--redis-url', env.redisUrl, '--prefix', prefix])).stdout,
    ) as Record<string, unknown>;
    expect(stats).toMatchObject({ store: 'redis', completed: 1, staleLeases: 1 });
  });

  it('refuses migrate and purge, which Redis does not need', async () => {
    for (const command of ['migrate', 'purge']) {
      const run = await cli([command, '--redis-url', env.redisUrl]);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/does not apply to Redis/);
    }
  });
});
