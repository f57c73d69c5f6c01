/**
 * A handler that never answers, on every adapter over the Redis store: with the engine's `maxExecution`,
 * its claim stops being extended, so after at most one more lease a retry takes the key over and is
 * answered, instead of 409 for as long as the process lives.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../../../src/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { env, requireService } from '../../helpers/env.js';
import { startAllAdapters } from '../../helpers/http-adapters.js';
import type { RunningServer, TestRoute } from '../../helpers/http-harness.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';

describe('HTTP: a handler that never answers, bounded by maxExecution (Redis)', () => {
  const prefix = `idemtest:hung:${randomUUID()}:`;
  let connection: TestRedisClient;
  const servers: Array<{ name: string; server: RunningServer }> = [];
  const calls: string[] = [];

  const handle: TestRoute['handle'] = (req) => {
    const tag = req.header('x-tag') ?? '';
    calls.push(tag);
    if (tag.endsWith('hang')) return new Promise(() => {}); // never answers
    return Promise.resolve({ status: 201, body: { kind: 'json', value: { tag } } });
  };

  beforeAll(async () => {
    await requireService('Redis', env.redisUrl);
    connection = await connectClient('node-redis', env.redisUrl);
    const store = redisStore({ client: connection.client, prefix, checkEvictionPolicy: false });
    const engine = createIdempotency({ store, leaseMs: 300, maxExecution: '600ms' });
    servers.push(...(await startAllAdapters(engine, [{ method: 'POST', path: '/pay', handle }])));
  });

  afterAll(async () => {
    for (const { server } of servers) await server.close();
    if (connection !== undefined) {
      await deleteKeys(connection.client, prefix);
      await connection.close();
    }
  });

  const post = (url: string, key: string, tag: string, signal?: AbortSignal) =>
    fetch(`${url}/pay`, {
      method: 'POST',
      headers: { 'idempotency-key': key, 'content-type': 'application/json', 'x-tag': tag },
      body: '{"amount":1}',
      ...(signal === undefined ? {} : { signal }),
    });

  it('answers 409 while the hung handler holds the key, then lets a retry take it over once', async () => {
    for (const { name, server } of servers) {
      const key = randomUUID();
      const hung = post(server.url, key, `${name}-hang`, AbortSignal.timeout(300)).catch(
        () => 'gave up',
      );
      await sleep(100);
      const held = await post(server.url, key, `${name}-retry`);
      expect(held.status, name).toBe(409);
      expect(await hung).toBe('gave up');

      // Without maxExecution the heartbeat would keep the claim alive, and this would stay 409.
      const started = performance.now();
      let retry = await post(server.url, key, `${name}-retry`);
      while (retry.status === 409 && performance.now() - started < 3000) {
        await sleep(100);
        retry = await post(server.url, key, `${name}-retry`);
      }
      expect(retry.status, name).toBe(201);
      expect(await retry.json()).toEqual({ tag: `${name}-retry` });
      const replay = await post(server.url, key, `${name}-again`);
      expect(replay.status, name).toBe(201);
      expect(replay.headers.get('idempotent-replayed'), name).toBe('true');
      expect(calls.filter((tag) => tag.startsWith(`${name}-`))).toEqual([
        `${name}-hang`,
        `${name}-retry`,
      ]);
    }
  });
});
