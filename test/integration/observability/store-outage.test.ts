/**
 * What an operator sees of a store outage (docs/observability.md, Runbook): an Express API on Redis whose
 * link a TCP proxy cuts. Each request answered 503 is one `store_errors_total{operation="claim"}` and no
 * `runs_total` outcome; its span carries the key's hash, a store-error event and no outcome, its status is
 * left to the span's owner, and nothing on it holds the client's key or scope; the store gauges report no
 * sample while the store does not answer, and the same key runs once the link is back.
 */
import { randomUUID } from 'node:crypto';
import { SpanStatusCode, trace } from '@opentelemetry/api';
import express from 'express';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { combineHooks } from '../../../src/index.js';
import {
  IdempotencyAttribute,
  IdempotencyEvent,
  openTelemetryHooks,
} from '../../../src/opentelemetry/index.js';
import {
  prometheusHooks,
  registerStoreStats,
  withStoreMetrics,
} from '../../../src/prometheus/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { env, requireService } from '../../helpers/env.js';
import { listenExpress } from '../../helpers/listen-express.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';
import { startRedisProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';
import { startTracing } from '../../helpers/tracing.js';

/** The value of the sample `series` in a scrape, or `undefined` when the scrape has none. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

describe('a store outage, as the metrics and traces show it', () => {
  const prefix = `test:outage:${randomUUID()}:`;
  let tracing: ReturnType<typeof startTracing>;
  let proxy: TcpProxy & { url: string };
  let connection: TestRedisClient;
  let direct: TestRedisClient;

  beforeAll(async () => {
    await requireService('redis', env.redisUrl);
    tracing = startTracing();
    proxy = await startRedisProxy(env.redisUrl);
    // node-redis sends nothing again after a reconnect: a claim given up on is not made later.
    connection = await connectClient('node-redis', proxy.url);
    direct = await connectClient('node-redis', env.redisUrl);
  });

  afterAll(async () => {
    await tracing?.stop();
    await connection?.close();
    await proxy?.close();
    if (direct !== undefined) {
      await deleteKeys(direct.client, prefix);
      await direct.close();
    }
  });

  it('counts each 503 once, annotates its span without an outcome or a secret, and recovers', async () => {
    // Arrange
    const registry = new Registry();
    const store = redisStore({ client: connection.client, prefix, checkEvictionPolicy: false });
    registerStoreStats(store, { registry, maxAgeMs: 0, timeoutMs: 500 });
    const idem = idempotency({
      store: withStoreMetrics(store, { registry }),
      namespace: 'payments',
      scope: (req) => req.header('x-customer') ?? 'anonymous',
      hooks: combineHooks(prometheusHooks({ registry }), openTelemetryHooks()),
    });
    const app = express();
    app.use((req, res, next) => {
      trace.getTracer('test').startActiveSpan(`POST ${req.header('idempotency-key')}`, (span) => {
        res.on('finish', () => span.end());
        next();
      });
    });
    app.post('/pay', idem.route({ key: 'required' }), (_req, res) => {
      res.status(201).json({ id: 'pay_1' });
    });
    app.get('/metrics', async (_req, res) => {
      res.type(registry.contentType).send(await registry.metrics());
    });
    const base = await listenExpress(app);
    const pay = (key: string) =>
      fetch(`${base}/pay`, {
        method: 'POST',
        headers: { 'idempotency-key': key, 'x-customer': 'cus_secret_42' },
      }).then((response) => response.status);
    const scrape = async () => (await fetch(`${base}/metrics`)).text();

    // Act: two requests while the link is cut, then the same key once it is back
    proxy.cut();
    const during = [await pay('order-outage-1'), await pay('order-outage-2')];
    const duringScrape = await scrape();
    proxy.restore();
    let after = 0;
    for (let attempt = 0; attempt < 50 && after !== 201; attempt++) {
      after = await pay('order-outage-1');
      if (after !== 201) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const afterScrape = await scrape();

    // Assert: the metrics
    expect(during).toEqual([503, 503]);
    expect(
      sample(
        duringScrape,
        'idempotency_store_errors_total{namespace="payments",operation="claim"}',
      ),
    ).toBe(2);
    expect(duringScrape).not.toMatch(/^idempotency_runs_total/m);
    expect(duringScrape).not.toMatch(/^idempotency_store_records\{/m);
    expect(
      sample(
        duringScrape,
        'idempotency_store_call_seconds_count{store="redis",operation="claim",result="error"}',
      ),
    ).toBe(2);
    expect(after).toBe(201);
    expect(
      sample(afterScrape, 'idempotency_runs_total{namespace="payments",outcome="executed"}'),
    ).toBe(1);
    expect(sample(afterScrape, 'idempotency_store_records{store="redis",status="completed"}')).toBe(
      1,
    );
    expect(`${duringScrape}${afterScrape}`).not.toMatch(/order-outage|cus_secret_42/);

    // Assert: the spans of the two refused requests
    const refused = tracing
      .spans()
      .filter((span) => span.name === 'POST order-outage-2' || span.name === 'POST order-outage-1')
      .slice(0, 2);
    expect(refused).toHaveLength(2);
    for (const span of refused) {
      expect(span.attributes[IdempotencyAttribute.KeyHash]).toMatch(/^[0-9a-f]{64}$/);
      expect(span.attributes).not.toHaveProperty(IdempotencyAttribute.Outcome);
      expect(span.status.code).toBe(SpanStatusCode.UNSET);
      expect(span.events.map((event) => event.name)).toEqual([IdempotencyEvent.StoreError]);
      expect(span.events[0]?.attributes).toMatchObject({
        [IdempotencyAttribute.Operation]: 'claim',
        'exception.type': 'StoreUnavailableError',
      });
      const written = JSON.stringify([span.attributes, span.events]);
      expect(written).not.toMatch(/order-outage|cus_secret_42|redis:\/\//);
    }
  });
});
