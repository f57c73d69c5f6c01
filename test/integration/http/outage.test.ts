/**
 * Store outage: a private redis-server (port 7100–7199) is killed, or the link to the shared one is cut by a
 * TCP proxy (a partition); every adapter must answer 503 problem+json with Retry-After in under a second,
 * without running the handler — unless the route opted into failing open.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../../../src/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { env, requireService } from '../../helpers/env.js';
import { startAllAdapters } from '../../helpers/http-adapters.js';
import type { RunningServer, TestRoute } from '../../helpers/http-harness.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';
import { freePorts, PrivateRedis } from '../../helpers/redis-servers.js';
import { startRedisProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';

const HTTP_OUTAGE_PORTS = [7100, 7200] as const;

/** A handler that records each request's `x-tag` and answers 201. */
function recordingHandler(executions: string[]): TestRoute['handle'] {
  return async (req) => {
    executions.push(req.header('x-tag') ?? '');
    return { status: 201, body: { kind: 'json', value: { ok: true } } };
  };
}

describe('HTTP on a Redis store whose server is down', () => {
  let redis: PrivateRedis;
  let connection: TestRedisClient;
  const servers: Array<{ name: string; server: RunningServer }> = [];
  const executions: string[] = [];

  const handle = recordingHandler(executions);

  beforeAll(async () => {
    const [port] = await freePorts(HTTP_OUTAGE_PORTS);
    redis = new PrivateRedis(port!);
    await redis.start();
    connection = await connectClient('node-redis', redis.url);
    const store = redisStore({
      client: connection.client,
      timeoutMs: 300,
      checkEvictionPolicy: false,
    });
    const engine = createIdempotency({ store, namespace: `outage-${randomUUID()}`, cache: false });
    servers.push(
      ...(await startAllAdapters(engine, [
        { method: 'POST', path: '/closed', handle },
        { method: 'POST', path: '/open', options: { failOpen: true }, handle },
      ])),
    );
    // Prove the path works while the server is up, then take it down.
    const response = await fetch(`${servers[0]!.server.url}/closed`, {
      method: 'POST',
      headers: {
        'idempotency-key': randomUUID(),
        'content-type': 'application/json',
        'x-tag': 'warmup',
      },
      body: '{}',
    });
    expect(response.status).toBe(201);
    await redis.kill();
  });

  afterAll(async () => {
    for (const { server } of servers) await server.close();
    await connection?.close().catch(() => undefined);
    await redis?.dispose();
  });

  const post = (url: string, tag: string) =>
    fetch(url, {
      method: 'POST',
      headers: {
        'idempotency-key': randomUUID(),
        'content-type': 'application/json',
        'x-tag': tag,
      },
      body: '{"amount":1}',
    });

  it('answers 503 store_unavailable with Retry-After in under 1 s and runs nothing', async () => {
    for (const { name, server } of servers) {
      const tag = `${name}-${randomUUID()}`;
      const started = performance.now();
      const response = await post(`${server.url}/closed`, tag);
      const elapsed = performance.now() - started;
      const problem = (await response.json()) as { type: string };
      expect(response.status, name).toBe(503);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(Number(response.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(problem.type).toMatch(/#store_unavailable$/);
      expect(elapsed, name).toBeLessThan(1000);
      expect(executions).not.toContain(tag);
    }
  });

  it('runs the handler unprotected on a route that opted into failOpen', async () => {
    for (const { name, server } of servers) {
      const tag = `${name}-${randomUUID()}`;
      const response = await post(`${server.url}/open`, tag);
      expect(response.status, name).toBe(201);
      expect(executions).toContain(tag);
    }
  });
});

/**
 * A partition rather than a dead server: the link to the shared Redis is cut by a TCP proxy, so the client's
 * connection stays open and its commands go unanswered (no error, no reconnect). Only the store's own
 * `timeoutMs` can notice; every adapter must still answer 503 in under a second and run nothing, and serve
 * again once the link is back.
 */
describe('HTTP on a Redis store cut off by a network partition', () => {
  let proxy: TcpProxy & { url: string };
  let connection: TestRedisClient;
  const servers: Array<{ name: string; server: RunningServer }> = [];
  const executions: string[] = [];
  const prefix = `idemtest:partition:${randomUUID()}:`;

  const handle = recordingHandler(executions);

  beforeAll(async () => {
    await requireService('Redis', env.redisUrl);
    proxy = await startRedisProxy(env.redisUrl);
    connection = await connectClient('node-redis', proxy.url);
    const store = redisStore({
      client: connection.client,
      prefix,
      timeoutMs: 300,
      checkEvictionPolicy: false,
    });
    const engine = createIdempotency({ store, namespace: `partition-${randomUUID()}` });
    servers.push(
      ...(await startAllAdapters(engine, [{ method: 'POST', path: '/closed', handle }])),
    );
  });

  afterAll(async () => {
    for (const { server } of servers) await server.close();
    await connection?.close().catch(() => undefined);
    await proxy?.close();
    // The records the test stored, through a direct connection: the proxied one may still be cut. Only once
    // Redis was reached, as in hung-handler.test.ts, so an unreachable Redis reports one error, not two.
    if (connection !== undefined) {
      const direct = await connectClient('node-redis', env.redisUrl);
      await deleteKeys(direct.client, prefix);
      await direct.close();
    }
  });

  const post = (url: string, key: string, tag: string) =>
    fetch(url, {
      method: 'POST',
      headers: { 'idempotency-key': key, 'content-type': 'application/json', 'x-tag': tag },
      body: '{"amount":1}',
    });

  it('answers 503 in under 1 s while cut, runs nothing, and runs the key once when the link is back', async () => {
    proxy.cut();
    const keys = new Map<string, string>();
    for (const { name, server } of servers) {
      const key = randomUUID();
      keys.set(name, key);
      const started = performance.now();
      const response = await post(`${server.url}/closed`, key, `${name}-cut`);
      const elapsed = performance.now() - started;
      expect(response.status, name).toBe(503);
      expect(((await response.json()) as { type: string }).type).toMatch(/#store_unavailable$/);
      expect(elapsed, name).toBeLessThan(1000);
    }
    expect(executions).toEqual([]);

    proxy.restore();
    for (const { name, server } of servers) {
      // The client reconnects on its own after the dropped connection; the first calls may still fail.
      let response = await post(`${server.url}/closed`, keys.get(name)!, `${name}-back`);
      for (let attempt = 0; response.status === 503 && attempt < 40; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        response = await post(`${server.url}/closed`, keys.get(name)!, `${name}-back`);
      }
      expect(response.status, name).toBe(201);
      const replay = await post(`${server.url}/closed`, keys.get(name)!, `${name}-replay`);
      expect(replay.status, name).toBe(201);
      expect(replay.headers.get('idempotent-replayed'), name).toBe('true');
    }
    expect(executions.sort()).toEqual(servers.map(({ name }) => `${name}-back`).sort());
  });
});
