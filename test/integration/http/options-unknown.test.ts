/**
 * Every adapter refuses, when it is created, an option name it does not have, instead of ignoring it:
 * - `idem.route({ scope })` was accepted and ignored (scope is the adapter's option): tenant B, sending
 *   tenant A's credentials, was replayed tenant A's answer;
 * - `idempotency({ store, keys: 'required' })` (for `key`) ran every request unprotected;
 * - engine options beside an `engine` were ignored (the engine is already built).
 * Fastify's own plugin options (`prefix`, `logLevel`, `logSerializers`) are accepted.
 */
import type express from 'express';
import fastify from 'fastify';
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { type ExpressIdempotencyOptions, idempotency } from '../../../src/express/index.js';
import { type FastifyIdempotencyOptions, idempotencyPlugin } from '../../../src/fastify/index.js';
import { type FetchIdempotencyOptions, withIdempotency } from '../../../src/fetch/index.js';
import {
  type HonoIdempotencyOptions,
  idempotency as honoIdempotency,
} from '../../../src/hono/index.js';
import type { HttpRouteOptions } from '../../../src/http/options.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';

const invalid = (message: RegExp) =>
  expect.objectContaining({ code: 'invalid_options', message: expect.stringMatching(message) });
const untyped = <T>(options: object) => options as T;
const tenant = (req: express.Request) => req.get('x-tenant') ?? '';

describe('Express', () => {
  it('refuses route({ scope }) instead of replaying one tenant the answer of another', () => {
    const idem = idempotency({ store: memoryStore() });
    expect(() => idem.route(untyped<HttpRouteOptions>({ key: 'required', scope: tenant }))).toThrow(
      invalid(/scope.*adapter/),
    );
  });

  it('refuses a misspelt option of the middleware, naming it', () => {
    expect(() =>
      idempotency(untyped<ExpressIdempotencyOptions>({ store: memoryStore(), keys: 'required' })),
    ).toThrow(invalid(/"keys".*key, methods/));
    expect(() =>
      idempotency(untyped<ExpressIdempotencyOptions>({ store: memoryStore(), leasMs: '30s' })),
    ).toThrow(invalid(/"leasMs"/));
  });

  it('refuses an engine option beside an engine, which is already built', () => {
    const engine = createIdempotency({ store: memoryStore() });
    expect(() =>
      idempotency(untyped<ExpressIdempotencyOptions>({ engine, namespace: 'orders' })),
    ).toThrow(invalid(/namespace.*engine/));
  });

  it('accepts every route, engine and adapter option, and a known one given as null or undefined', () => {
    const idem = idempotency(
      untyped<ExpressIdempotencyOptions>({
        store: memoryStore(),
        namespace: 'orders',
        key: 'required',
        leaseMs: '10s',
        retentionMs: undefined,
        storeErrors: false,
        hooks: null,
        codec: null,
        scope: tenant,
        requestBodyLimit: undefined,
        maxBodyBytes: undefined,
      }),
    );
    expect(() => idem.route({ key: 'optional', failOpen: false })).not.toThrow();
    expect(() =>
      idempotency({
        engine: createIdempotency({ store: memoryStore() }),
        key: 'required',
        leaseMs: 5000,
      }),
    ).not.toThrow();
  });
});

describe('Fastify', () => {
  it('refuses a misspelt plugin option when the plugin registers', async () => {
    const app = fastify();
    app.register(
      idempotencyPlugin,
      untyped<FastifyIdempotencyOptions>({ store: memoryStore(), keys: 'required' }),
    );
    await expect(app.ready()).rejects.toThrow(invalid(/"keys"/));
  });

  it("accepts Fastify's own plugin options and keepJsonText", async () => {
    const app = fastify();
    app.register(idempotencyPlugin, {
      store: memoryStore(),
      keepJsonText: true,
      prefix: '/v1',
      logLevel: 'warn',
      logSerializers: {},
    } as FastifyIdempotencyOptions);
    await expect(app.ready()).resolves.toBeDefined();
    await app.close();
  });

  it('refuses scope in a route config', async () => {
    const app = fastify();
    await app.register(idempotencyPlugin, { store: memoryStore() });
    await expect(
      (async () => {
        app.post(
          '/orders',
          { config: { idempotency: untyped<HttpRouteOptions>({ scope: () => 'tenant' }) } },
          async () => ({ ok: true }),
        );
        await app.ready();
      })(),
    ).rejects.toThrow(invalid(/scope.*adapter/));
    await app.close();
  });
});

describe('fetch and Hono', () => {
  it('withIdempotency refuses a misspelt option', () => {
    expect(() =>
      withIdempotency(
        () => new Response(null),
        untyped<FetchIdempotencyOptions>({ store: memoryStore(), keys: 'required' }),
      ),
    ).toThrow(invalid(/"keys"/));
  });

  it("Hono's middleware refuses a misspelt option, and route({ scope })", () => {
    expect(() =>
      honoIdempotency(
        untyped<HonoIdempotencyOptions>({ store: memoryStore(), keepJsonText: true }),
      ),
    ).toThrow(invalid(/"keepJsonText"/));
    const idem = honoIdempotency({ store: memoryStore() });
    expect(() => idem.route(untyped<HttpRouteOptions>({ scope: () => 'tenant' }))).toThrow(
      invalid(/scope.*adapter/),
    );
    expect(new Hono().post('/orders', idem.route({ key: 'required' }))).toBeDefined();
  });
});
