/**
 * Observability end to end: an Express API on the shared Redis store, with Prometheus metrics scraped
 * from its own `/metrics` route and an OpenTelemetry span per request (as the HTTP instrumentation would
 * make). Every way a request can end must show in both, and each span must carry its own request's
 * outcome although the claims of concurrent requests may go to Redis in one batched script call.
 */
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { trace } from '@opentelemetry/api';
import express from 'express';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { combineHooks } from '../../../src/index.js';
import { IdempotencyAttribute, openTelemetryHooks } from '../../../src/opentelemetry/index.js';
import { prometheusHooks, withStoreMetrics } from '../../../src/prometheus/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { env, requireService } from '../../helpers/env.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';
import { startTracing } from '../../helpers/tracing.js';

describe('metrics and traces of an Express API on Redis', () => {
  const prefix = `test:observability:${randomUUID()}:`;
  const registry = new Registry();
  let tracing: ReturnType<typeof startTracing>;
  let connection: TestRedisClient;
  let server: Server;
  let base: string;
  let executions = 0;
  const gates = new Map<string, () => void>();

  beforeAll(async () => {
    await requireService('redis', env.redisUrl);
    tracing = startTracing();
    connection = await connectClient('node-redis', env.redisUrl);
    const idem = idempotency({
      store: withStoreMetrics(
        redisStore({ client: connection.client, prefix, checkEvictionPolicy: false }),
        { registry },
      ),
      namespace: 'orders-api',
      hooks: combineHooks(prometheusHooks({ registry }), openTelemetryHooks()),
    });
    const app = express();
    // One span per request, active while the route runs: what @opentelemetry/instrumentation-http does.
    app.use((req, res, next) => {
      trace.getTracer('test').startActiveSpan(`${req.method} ${req.url}`, (span) => {
        span.setAttribute('test.tag', String(req.header('x-tag') ?? ''));
        res.on('finish', () => span.end());
        next();
      });
    });
    app.use(express.json());
    app.post('/orders', idem.route({ key: 'required' }), async (req, res) => {
      executions++;
      const hold = req.header('x-hold');
      if (hold !== undefined) await new Promise<void>((resolve) => gates.set(hold, resolve));
      if (req.body.fail === true) {
        res.status(503).json({ error: 'payment provider down' });
        return;
      }
      res.status(201).json({ id: `ord_${executions}` });
    });
    app.get('/metrics', async (_req, res) => {
      res.type(registry.contentType).send(await registry.metrics());
    });
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server?.close();
    await tracing?.stop();
    if (connection !== undefined) {
      await deleteKeys(connection.client, prefix);
      await connection.close();
    }
  });

  const post = (key: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${base}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, ...headers },
      body: JSON.stringify(body),
    });

  /** The value of one series in the scraped text, or 0 when it is absent. */
  function sample(text: string, series: string): number {
    const line = text.split('\n').find((l) => l.startsWith(`${series} `));
    return line === undefined ? 0 : Number(line.slice(series.length + 1));
  }

  it('counts each outcome and tags each request span with it', async () => {
    // Ten new orders at once: their claims may share batched script calls (under load each may go alone).
    const fresh = await Promise.all(
      Array.from({ length: 10 }, (_, i) => post(`new-${i}`, { sku: i }, { 'x-tag': `new-${i}` })),
    );
    expect(fresh.map((r) => r.status)).toEqual(Array(10).fill(201));
    expect(
      (await post('new-3', { sku: 3 }, { 'x-tag': 'replay' })).headers.get('idempotent-replayed'),
    ).toBe('true');
    expect((await post('new-3', { sku: 'other' }, { 'x-tag': 'mismatch' })).status).toBe(422);
    expect((await post('failing', { fail: true }, { 'x-tag': 'failed' })).status).toBe(503);
    const held = post('held', { sku: 'slow' }, { 'x-hold': 'held', 'x-tag': 'holder' });
    while (!gates.has('held')) await new Promise((resolve) => setTimeout(resolve, 5));
    expect((await post('held', { sku: 'slow' }, { 'x-tag': 'conflict' })).status).toBe(409);
    gates.get('held')?.();
    expect((await held).status).toBe(201);

    const text = await (await fetch(`${base}/metrics`)).text();
    const runs = (outcome: string) =>
      sample(text, `idempotency_runs_total{namespace="orders-api",outcome="${outcome}"}`);
    expect({
      executed: runs('executed'),
      replayed: runs('replayed'),
      mismatch: runs('mismatch'),
      failed: runs('failed'),
      inProgress: runs('in_progress'),
    }).toEqual({ executed: 11, replayed: 1, mismatch: 1, failed: 1, inProgress: 1 });
    expect(
      sample(
        text,
        'idempotency_execution_seconds_count{namespace="orders-api",outcome="executed"}',
      ),
    ).toBe(11);
    expect(text).not.toContain('new-3');
    // Every claim and completion the engine sent went through the timed store, and nothing else did.
    // Which calls carried them depends on timing: a lone claim or completion goes as `claim` /
    // `complete`, several of one kind as `claimMany` / `completeMany`, and completions waiting beside
    // claims as one `completeAndClaimMany`, whose item count is both kinds together. So the claims and
    // the completions are exact only summed over every path. Under load (each request read in a tick of
    // its own) the 13 claims often all go as lone `claim` calls, with no completion counted beside them.
    const items = (operation: string) =>
      sample(text, `idempotency_store_batch_items_sum{store="redis",operation="${operation}"}`);
    const calls = (operation: string) =>
      sample(
        text,
        `idempotency_store_call_seconds_count{store="redis",operation="${operation}",result="ok"}`,
      );
    // The replay and the mismatch of new-3 are answered from the engine's cache of completed records,
    // without a store call: 10 new, the failure, the holder and the conflict.
    const claims = 13;
    const completions = 11; // 10 new and the holder; the failure (503) released its key instead
    expect(text).not.toMatch(/idempotency_store_call_seconds_count\{[^}]*result="error"/);
    expect(sample(text, 'idempotency_cache_replays_total{namespace="orders-api"}')).toBe(1);
    expect(calls('get')).toBe(0);
    expect(calls('release')).toBe(1);
    const alone = {
      claims: calls('claim') + items('claimMany'),
      completions: calls('complete') + items('completeMany'),
    };
    expect(alone.claims).toBeLessThanOrEqual(claims);
    expect(alone.completions).toBeLessThanOrEqual(completions);
    expect(alone.claims + alone.completions + items('completeAndClaimMany')).toBe(
      claims + completions,
    );
    // Each combined call carries at least one of each kind.
    expect(items('completeAndClaimMany')).toBeGreaterThanOrEqual(2 * calls('completeAndClaimMany'));

    const byTag = new Map(
      tracing.spans().map((span) => [String(span.attributes['test.tag']), span.attributes]),
    );
    for (let i = 0; i < 10; i++) {
      expect(byTag.get(`new-${i}`)).toMatchObject({
        [IdempotencyAttribute.Outcome]: 'executed',
        [IdempotencyAttribute.KeyHash]: expect.stringMatching(/^[0-9a-f]{64}$/),
      });
    }
    const hashes = new Set(
      Array.from({ length: 10 }, (_, i) => byTag.get(`new-${i}`)?.[IdempotencyAttribute.KeyHash]),
    );
    expect(hashes.size).toBe(10);
    expect(byTag.get('replay')?.[IdempotencyAttribute.KeyHash]).toBe(
      byTag.get('new-3')?.[IdempotencyAttribute.KeyHash],
    );
    expect(byTag.get('replay')?.[IdempotencyAttribute.Outcome]).toBe('replayed');
    expect(byTag.get('replay')?.[IdempotencyAttribute.ReplaySource]).toBe('cache');
    expect(byTag.get('mismatch')?.[IdempotencyAttribute.Outcome]).toBe('mismatch');
    expect(byTag.get('failed')?.[IdempotencyAttribute.Outcome]).toBe('failed');
    expect(byTag.get('conflict')?.[IdempotencyAttribute.Outcome]).toBe('in_progress');
    expect(byTag.get('holder')?.[IdempotencyAttribute.Outcome]).toBe('executed');
  });
});
