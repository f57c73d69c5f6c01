/**
 * Peer row: `express-idempotency` 1.0.6 with `express-idempotency-redis-adapter` 1.0.8.
 *
 * Configured as the two READMEs show:
 * - the adapter gets `connectionConfig: { url }` and is `connect()`ed before use (its own node-redis 1.x client);
 *   TTL left at its default (86 400 s);
 * - `app.use(idempotency({ dataAdapter }))` with the defaults: key header `Idempotency-Key`, the default intent
 *   validator (url, method, query and body must match) and the default response validator (store 2xx only);
 * - the route handler first checks `getSharedIdempotencyService().isHit(req)` and returns: the middleware
 *   replays a stored response and then still calls `next()` "by design", so without that check the handler
 *   would run again on every replay.
 *
 * The adapter writes the raw header value as the Redis key, with no prefix of its own; the benchmark therefore
 * sends keys that start with `keyPrefix` (and uses a private DB), so the run's cleanup can find them.
 */
import express from 'express';
import { getSharedIdempotencyService, idempotency } from 'express-idempotency';
import redisAdapterModule from 'express-idempotency-redis-adapter';
import type { PeerAppFactory } from './types.js';

// The adapter is CommonJS with `exports.default`; under Node's ESM interop the default import is the whole
// `module.exports` object, so the class sits one level down.
const RedisAdapter = redisAdapterModule.default;

/** Express app behind `express-idempotency` on Redis. */
export const createPeerApp: PeerAppFactory = async ({ redisUrl, runOrder }) => {
  const dataAdapter = new RedisAdapter({ connectionConfig: { url: redisUrl } });
  await dataAdapter.connect();
  const app = express();
  app.use(express.json());
  app.use(idempotency({ dataAdapter }));
  app.post('/orders', async (req, res) => {
    if (getSharedIdempotencyService().isHit(req)) return;
    res.status(201).json(await runOrder(req.body ?? {}));
  });
  return { app, close: () => dataAdapter.disconnect() };
};
