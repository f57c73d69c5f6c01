/**
 * Child process of `bench/http-peers.ts`: one Express server behind one peer library (see the files next to
 * this one), so the load generator and the server do not share an event loop. Configuration comes in
 * `IK_BENCH_PEER` (JSON, {@link PeerServerConfig}); the port goes back over IPC. On a `'cpu'` message the
 * child answers like `bench/lib/http-server.ts` (its `process.cpuUsage()`), plus how many times the route's
 * work really ran, so the parent can check that replays do not run it again.
 */
import type { AddressInfo } from 'node:net';
import type { ErrorRequestHandler } from 'express';
import type { BenchCpuReport } from '../lib/http-server.js';
import type { OrderBody, PeerAppFactory, PeerName, PeerServerConfig } from './types.js';

/** The child's answer to a `'cpu'` message. */
export interface PeerStats extends BenchCpuReport {
  /** How many times the route's work ran since the server started. */
  executions: number;
}

const config = JSON.parse(process.env.IK_BENCH_PEER ?? '{}') as PeerServerConfig;

const factories: Record<PeerName, () => Promise<{ createPeerApp: PeerAppFactory }>> = {
  'express-idempotency': () => import('./express-idempotency.js'),
  'node-idempotency': () => import('./node-idempotency.js'),
  powertools: () => import('./powertools.js'),
};

let executions = 0;
// The same work as `bench/lib/http-server.ts`'s route: the configured delay, then the order.
async function runOrder(body: OrderBody) {
  executions++;
  if (config.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, config.delayMs));
  return { id: 'ord_123', amount: body.amount ?? 0 };
}

const { createPeerApp } = await factories[config.peer]();
const { app } = await createPeerApp({
  redisUrl: config.redisUrl,
  keyPrefix: config.keyPrefix,
  runOrder,
});
// The application's own error handler, which the peers' READMEs expect after the routes: it keeps the status
// a peer set before `next(err)` (409, 417, 422, …) and answers without Express's per-error stack trace log,
// which would swamp a run that fails on every request.
const errorHandler: ErrorRequestHandler = (error: Error, _req, res, _next) => {
  res.status(res.statusCode >= 400 ? res.statusCode : 500).json({ error: error.message });
};
app.use(errorHandler);
const port = await new Promise<number>((resolve) => {
  const server = app.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
});
process.on('message', (message) => {
  if (message === 'cpu')
    process.send?.({ cpu: process.cpuUsage(), executions } satisfies PeerStats);
});
process.send?.({ port });
process.on('disconnect', () => process.exit(0));
