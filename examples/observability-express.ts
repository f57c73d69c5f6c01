/**
 * Metrics and traces: an Express API on SQLite whose idempotency layer counts every request in
 * Prometheus metrics (served on `GET /metrics`), times every store call, and tags each request's
 * OpenTelemetry span with its outcome and hashed key. It sends a new order, its retry, a misused key and
 * a failing request, then prints the spans' `idempotency.*` attributes, the `idempotency_runs_total`
 * series and the store calls made.
 *
 * Run: `npx tsx examples/observability-express.ts`.
 * @module
 */
import type { AddressInfo } from 'node:net';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import express from 'express';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { idempotency } from '../src/express/index.js';
import { combineHooks } from '../src/index.js';
import { openTelemetryHooks } from '../src/opentelemetry/index.js';
import { prometheusHooks, withStoreMetrics } from '../src/prometheus/index.js';
import { sqliteStore } from '../src/sqlite/index.js';

// Tracing: in a real service the Node SDK and the HTTP instrumentation do this; here spans stay in memory
// so the example can print them.
const spans = new InMemorySpanExporter();
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(
  new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }),
);

// Metrics: the application's registry, with the process metrics beside ours.
const registry = new Registry();
collectDefaultMetrics({ register: registry });

const idem = idempotency({
  // In memory, so every run starts afresh; a service passes a file path. Wrapped to time its calls.
  store: withStoreMetrics(sqliteStore({ database: ':memory:' }), { registry }),
  // The `namespace` label of every metric.
  namespace: 'orders-api',
  hooks: combineHooks(
    prometheusHooks({ registry }),
    openTelemetryHooks(),
    // Your own logging sits beside them: hooks only ever see the hashed key.
    { onLeaseLost: (event) => console.warn('lease lost', event.storageKey) },
  ),
});

const app = express();
// What @opentelemetry/instrumentation-http does for you: one active span per request.
app.use((req, res, next) => {
  trace.getTracer('example').startActiveSpan(`${req.method} ${req.path}`, (span) => {
    // 'close', not 'finish': it comes for an aborted request too, whose span would otherwise stay open.
    res.on('close', () => span.end());
    next();
  });
});
app.use(express.json());
app.post('/orders', idem.route({ key: 'required' }), (req, res) => {
  if (req.body.amount > 1000) {
    // A 5xx releases the key: the client may retry.
    res.status(502).json({ error: 'payment provider unavailable' });
    return;
  }
  res.status(201).json({ id: `ord_${Date.now()}`, amount: req.body.amount });
});
app.get('/metrics', async (_req, res) => {
  res.type(registry.contentType).send(await registry.metrics());
});

const server = app.listen(0, '127.0.0.1');
await new Promise((resolve) => server.once('listening', resolve));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

const requests: Array<[label: string, key: string, body: { amount: number }]> = [
  ['new order', 'order-1', { amount: 42 }],
  ['its retry', 'order-1', { amount: 42 }],
  ['same key, other body', 'order-1', { amount: 43 }],
  ['provider down', 'order-2', { amount: 5000 }],
];
for (const [label, key, body] of requests) {
  const response = await fetch(`${base}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
  });
  console.log(`${label.padEnd(22)} → ${response.status}`);
}

console.log('\nspans:');
for (const span of spans.getFinishedSpans()) {
  const { 'idempotency.outcome': outcome, 'idempotency.key_hash': hash } = span.attributes;
  console.log(
    `  ${span.name.padEnd(13)} idempotency.outcome=${outcome} key_hash=${String(hash).slice(0, 12)}…`,
  );
}

const metrics = await (await fetch(`${base}/metrics`)).text();
console.log('\nmetrics:');
for (const line of metrics.split('\n')) {
  if (line.startsWith('idempotency_runs_total{')) console.log(`  ${line}`);
  if (line.startsWith('idempotency_store_call_seconds_count{')) console.log(`  ${line}`);
}
server.close();
