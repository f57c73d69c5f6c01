/**
 * Peer row: `@aws-lambda-powertools/idempotency` 2.35.0 with its Redis layer, `CachePersistenceLayer` (exported
 * as `@aws-lambda-powertools/idempotency/cache`; there is no `/redis` entry point), on a connected
 * `@redis/client` (node-redis 6), as its TSDoc example shows.
 *
 * Powertools targets Lambda handlers and has no HTTP integration, so the route's work is wrapped with
 * `makeIdempotent`, the README's recipe for "any other arbitrary function". The wrapped function gets an
 * event-like `{ headers, body }` and returns `{ statusCode, body }`; the route sends that (first run or replay).
 * Config: the README's Middy example values (`hashFunction: 'md5'`, `useLocalCache: false`,
 * `expiresAfterSeconds: 3600`, `throwOnNoIdempotencyKey: false`) with `eventKeyJmesPath` on the
 * Idempotency-Key header (quoted: JMESPath identifiers cannot contain `-`). Two additions:
 * - `keyPrefix` namespaces the run's keys (the default is the Lambda function name, empty here);
 * - a stand-in `lambdaContext` whose `getRemainingTimeInMillis()` is 30 s, playing the role of a request
 *   timeout: the docs say to register the context so in-progress records carry a deadline; without one the
 *   Redis layer treats every in-progress record as an orphan and lets concurrent duplicates run (issue #5678).
 * Payload validation stays off (the default): with the Redis layer in 2.35.0 it makes identical replays fail,
 * because completion drops the stored hash (issue #5705). Errors map to HTTP as users must do themselves:
 * `IdempotencyAlreadyInProgressError` → 409, `IdempotencyValidationError` → 422, anything else → 500.
 */
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import { createClient } from '@redis/client';
import express from 'express';
import type { Order, OrderBody, PeerAppFactory } from './types.js';

/** The event the wrapped function receives. */
interface OrderEvent {
  headers: Record<string, unknown>;
  body: OrderBody;
}

/** What the wrapped function returns (and Powertools stores and replays). */
interface OrderResult {
  statusCode: number;
  body: Order;
}

/** Stand-in for the Lambda context: only `getRemainingTimeInMillis` is read by the idempotency utility. */
const requestTimeout = {
  getRemainingTimeInMillis: () => 30_000,
} as unknown as ConstructorParameters<typeof IdempotencyConfig>[0]['lambdaContext'];

/** Express app whose route runs its work through Powertools `makeIdempotent` on Redis. */
export const createPeerApp: PeerAppFactory = async ({ redisUrl, keyPrefix, runOrder }) => {
  const client = await createClient({ url: redisUrl }).connect();
  const persistenceStore = new CachePersistenceLayer({ client });
  const config = new IdempotencyConfig({
    hashFunction: 'md5',
    useLocalCache: false,
    expiresAfterSeconds: 3600,
    throwOnNoIdempotencyKey: false,
    eventKeyJmesPath: 'headers."idempotency-key"',
    lambdaContext: requestTimeout,
  });
  const processOrder = makeIdempotent(
    async (event: OrderEvent): Promise<OrderResult> => ({
      statusCode: 201,
      body: await runOrder(event.body),
    }),
    { persistenceStore, config, keyPrefix: `${keyPrefix}powertools` },
  );
  const app = express();
  app.use(express.json());
  app.post('/orders', async (req, res, next) => {
    try {
      const result = await processOrder({ headers: req.headers, body: req.body ?? {} });
      res.status(result.statusCode).json(result.body);
    } catch (error) {
      // Powertools matches its errors by `name` (dual-package hazard), so do the same.
      const name = (error as Error | undefined)?.name;
      if (name === 'IdempotencyAlreadyInProgressError')
        res.status(409).setHeader('Retry-After', '1');
      else if (name === 'IdempotencyValidationError') res.status(422);
      next(error);
    }
  });
  return {
    app,
    close: async () => {
      await client.quit();
    },
  };
};
