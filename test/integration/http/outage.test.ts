/**
 * Store outage: a private redis-server (port 7100–7199) is killed; every adapter must answer 503
 * problem+json with Retry-After in under a second, without running the handler — unless the route opted
 * into failing open.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../../../src/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { allHarnesses } from '../../helpers/http-adapters.js';
import type { RunningServer, TestRoute } from '../../helpers/http-harness.js';
import { connectClient, type TestRedisClient } from '../../helpers/redis-clients.js';
import { freePorts, PrivateRedis } from '../../helpers/redis-servers.js';

const HTTP_OUTAGE_PORTS = [7100, 7200] as const;

describe('HTTP on a Redis store whose server is down', () => {
  let redis: PrivateRedis;
  let connection: TestRedisClient;
  const servers: Array<{ name: string; server: RunningServer }> = [];
  const executions: string[] = [];

  const handle: TestRoute['handle'] = async (req) => {
    executions.push(req.header('x-tag') ?? '');
    return { status: 201, body: { kind: 'json', value: { ok: true } } };
  };

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
    for (const harness of allHarnesses) {
      const server = await harness.start({
        engine,
        defaults: {},
        routes: [
          { method: 'POST', path: '/closed', handle },
          { method: 'POST', path: '/open', options: { failOpen: true }, handle },
        ],
      });
      servers.push({ name: harness.name, server });
    }
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
