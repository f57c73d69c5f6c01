import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisStore } from '../../../src/redis/index.js';
import { env, requireService } from '../../helpers/env.js';
import { connectClient, type RedisLib, type TestRedisClient } from '../../helpers/redis-clients.js';
import { freePorts, PORT_SLICES, PrivateRedis } from '../../helpers/redis-servers.js';

// SCRIPT FLUSH empties the server's script cache: run on a private server so no other test is disturbed.
let server: PrivateRedis;
let admin: TestRedisClient;

async function noScriptErrors(): Promise<number> {
  const info = String(
    await (admin.client as { sendCommand(a: string[]): Promise<unknown> }).sendCommand([
      'INFO',
      'errorstats',
    ]),
  );
  return Number(/errorstat_NOSCRIPT:count=(\d+)/.exec(info)?.[1] ?? 0);
}

async function flush(): Promise<void> {
  await (admin.client as { sendCommand(a: string[]): Promise<unknown> }).sendCommand([
    'SCRIPT',
    'FLUSH',
  ]);
}

beforeAll(async () => {
  await requireService('Redis', env.redisUrl);
  const [port] = await freePorts(PORT_SLICES.scriptFlush);
  server = new PrivateRedis(port!);
  await server.start();
  admin = await connectClient('node-redis', server.url);
});

afterAll(async () => {
  await admin?.close();
  await server?.dispose();
});

describe.each<RedisLib>(['node-redis', 'ioredis'])('redis store after SCRIPT FLUSH (%s)', (lib) => {
  it('recovers every operation transparently from NOSCRIPT, once per flush', async () => {
    // Arrange
    const connection = await connectClient(lib, server.url);
    const store = redisStore({ client: connection.client, prefix: `flush:${lib}:` });
    const first = await store.claim('a', { fingerprint: 'fp', leaseMs: 60_000 });
    expect(first.claimed).toBe(true);
    if (!first.claimed) return;

    // Act + Assert: flush before each kind of call; each still succeeds, after exactly one NOSCRIPT.
    const steps: Array<[string, () => Promise<unknown>, unknown]> = [
      [
        'claim',
        () => store.claim('b', { fingerprint: 'fp', leaseMs: 60_000 }).then((r) => r.claimed),
        true,
      ],
      ['extend', () => store.extend('a', first.token, 60_000), true],
      ['get', () => store.get('a').then((r) => r?.status), 'in_progress'],
      ['complete', () => store.complete('a', first.token, Uint8Array.of(1, 2, 3), 60_000), true],
      ['release', () => store.release('a', first.token), false],
      [
        'claimMany',
        () =>
          store
            .claimMany([
              { key: 'c', fingerprint: 'fp', leaseMs: 60_000 },
              { key: 'c', fingerprint: 'fp', leaseMs: 60_000 },
            ])
            .then((results) => results.map((r) => r.claimed)),
        [true, false],
      ],
      [
        'completeMany',
        () =>
          store.completeMany([
            { key: 'a', token: first.token, outcome: Uint8Array.of(1, 2, 3), retentionMs: 60_000 },
            { key: 'x', token: 1, outcome: Uint8Array.of(1), retentionMs: 60_000 },
          ]),
        [true, false],
      ],
    ];
    for (const [name, call, expected] of steps) {
      await flush();
      const before = await noScriptErrors();
      expect(await call(), name).toEqual(expected);
      expect((await noScriptErrors()) - before, `${name}: one NOSCRIPT, then EVAL`).toBe(1);
      // The EVAL fallback cached the script again: the same call once more is a plain EVALSHA.
      const again = await noScriptErrors();
      await call();
      expect((await noScriptErrors()) - again, `${name}: cached again`).toBe(0);
    }
    await connection.close();
  });
});
