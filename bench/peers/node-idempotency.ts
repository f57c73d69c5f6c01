/**
 * Peer row: `@node-idempotency/core` 1.0.11 with `@node-idempotency/storage-adapter-redis` 1.0.2.
 *
 * Their Express plugin (`@node-idempotency/express`) is not on the registry, so this is the thin middleware its
 * source (`packages/plugin-express/src/middleware.ts` at github.com/mahendraHegde/node-idempotency) and the core
 * README describe: `onRequest` before the route; a new request hooks `res.send` and persists the response with
 * `onResponse` (fire-and-forget, as the plugin does); a duplicate gets the stored status, `Content-Type` and
 * body plus `Idempotent-Replayed: true`; idempotency errors map to the plugin's codes (409 + `Retry-After: 1`,
 * 422, 400). One deliberate difference: an error that is not an `IdempotencyError` goes to `next(err)` (the
 * plugin swallows it and the request hangs), so a store failure shows up as a 500 in the table, not a stall.
 *
 * Configuration: the defaults (key header `idempotency-key`, 24 h `cacheTTLMS`, `inProgressStrategy.wait`
 * false, `enforceIdempotency` false) except `cacheKeyPrefix`, which namespaces the run's keys. The Redis
 * adapter gets `{ url }` (its own node-redis 4 client) and is `connect()`ed, as its README shows.
 */
import {
  Idempotency,
  IdempotencyError,
  IdempotencyErrorCodes,
  type IdempotencyParams,
} from '@node-idempotency/core';
import { RedisStorageAdapter } from '@node-idempotency/storage-adapter-redis';
import express, { type RequestHandler } from 'express';
import type { PeerAppFactory } from './types.js';

/** The plugin's `idempotency2HttpCodeMap` (`packages/shared/src/http.ts`). */
const STATUS: Record<IdempotencyErrorCodes, number> = {
  [IdempotencyErrorCodes.IDEMPOTENCY_FINGERPRINT_MISSMATCH]: 422,
  [IdempotencyErrorCodes.IDEMPOTENCY_KEY_LEN_EXEEDED]: 400,
  [IdempotencyErrorCodes.IDEMPOTENCY_KEY_MISSING]: 400,
  [IdempotencyErrorCodes.REQUEST_IN_PROGRESS]: 409,
};

/** The plugin's Express middleware over one `Idempotency` instance. */
function middleware(core: Idempotency): RequestHandler {
  return async (req, res, next) => {
    const params: IdempotencyParams = {
      headers: req.headers,
      body: req.body as Record<string, unknown> | undefined,
      path: req.url,
      method: req.method,
    };
    try {
      const stored = await core.onRequest(params);
      if (!stored) {
        const send = res.send.bind(res);
        res.send = (body?: unknown) => {
          // Persist only the first send: Express's `res.json` calls `res.send` once with the JSON string.
          res.send = send;
          const additional: Record<string, unknown> = { statusCode: res.statusCode };
          const contentType = res.getHeader('content-type');
          if (contentType !== undefined) additional['Content-Type'] = contentType;
          let payload = body;
          if (typeof body === 'string' && String(contentType).includes('application/json')) {
            try {
              payload = JSON.parse(body);
            } catch {
              // keep the raw string, as the plugin does
            }
          }
          void core
            .onResponse(params, {
              additional,
              ...(res.statusCode < 400 ? { body: payload } : { error: payload }),
            })
            .catch(() => undefined);
          return send(body);
        };
        next();
        return;
      }
      const statusCode = stored.additional?.statusCode;
      if (typeof statusCode === 'number') res.status(statusCode);
      const contentType = stored.additional?.['Content-Type'];
      if (typeof contentType === 'string') res.setHeader('Content-Type', contentType);
      res.setHeader('Idempotent-Replayed', 'true');
      if (stored.body) res.send(stored.body);
      else next(stored.error);
    } catch (err) {
      if (err instanceof IdempotencyError) {
        if (err.code === IdempotencyErrorCodes.REQUEST_IN_PROGRESS)
          res.setHeader('Retry-After', '1');
        res.status(STATUS[err.code as IdempotencyErrorCodes] ?? 500);
      }
      next(err);
    }
  };
}

/** Express app behind the `@node-idempotency/core` middleware on Redis. */
export const createPeerApp: PeerAppFactory = async ({ redisUrl, keyPrefix, runOrder }) => {
  const storage = new RedisStorageAdapter({ url: redisUrl });
  await storage.connect();
  const core = new Idempotency(storage, { cacheKeyPrefix: `${keyPrefix}node-idempotency` });
  const app = express();
  app.use(express.json());
  app.use(middleware(core));
  app.post('/orders', async (req, res) => {
    res.status(201).json(await runOrder(req.body ?? {}));
  });
  return { app, close: () => storage.disconnect() };
};
