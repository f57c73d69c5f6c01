/**
 * The Fastify plugin joins routes through `onRoute`, which Fastify calls only for routes declared after
 * it: a route declared before runs unprotected (no 400 without a key, one run per request), even with
 * `config: { idempotency: { key: 'required' } }`. Such a route in the plugin's scope, with a method it
 * covers, fails `ready()`; routes declared after it, routes of methods it does not cover, and routes of
 * another encapsulated plugin do not.
 */
import fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { CAPTURE_HOOK_NAME, listedRoutes } from '../../../src/fastify/route-order.js';
import { memoryStore } from '../../../src/index.js';

const handler = async () => ({ ok: true });

describe('routes declared before the Fastify plugin', () => {
  it('fails ready() for a route that asks for a required key but was declared before the plugin', async () => {
    const app = fastify();
    app.post('/payments', { config: { idempotency: { key: 'required' } } }, handler);
    await app.register(idempotencyPlugin, { store: memoryStore() });
    await expect(app.ready()).rejects.toThrow(
      expect.objectContaining({
        name: 'InvalidOptionsError',
        message: expect.stringMatching(/POST \/payments was declared before the plugin/),
      }),
    );
  });

  it('fails ready() for a covered route declared before without config, naming every one', async () => {
    const app = fastify();
    app.route({ method: ['POST', 'PUT'], url: '/orders/:id', handler });
    app.patch('/orders/:id/items', handler);
    app.post('/v1', handler);
    await app.register(idempotencyPlugin, { store: memoryStore() });
    app.post('/v1/later', handler);
    const error = await app.ready().then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).toMatch(
      /POST \/orders\/:id, POST \/v1, PATCH \/orders\/:id\/items were/,
    );
    expect(error?.message).not.toMatch(/later|PUT/);
  });

  it('accepts routes declared after it, uncovered methods before it, and other plugins’ routes', async () => {
    const app = fastify();
    app.get('/health', handler);
    app.register(async (admin) => {
      admin.post('/admin/reindex', handler);
    });
    await app.register(async (api) => {
      await api.register(idempotencyPlugin, { store: memoryStore() });
      api.post('/payments', { config: { idempotency: { key: 'required' } } }, handler);
      api.post('/payments', { constraints: { version: '2.0.0' } }, handler);
      api.post('/ping', { config: { idempotency: false } }, handler);
      api.register(async (child) => child.post('/child', handler), { prefix: '/v1' });
    });
    await expect(app.ready()).resolves.toBeDefined();
    const missing = await app.inject({ method: 'POST', url: '/payments' });
    expect(missing.statusCode).toBe(400);
    await app.close();
  });

  it('accepts one registration per encapsulated scope, each with its own options, and applies each', async () => {
    const app = fastify();
    await app.register(
      async (v1) => {
        await v1.register(idempotencyPlugin, { store: memoryStore(), key: 'required' });
        v1.post('/payments', handler);
      },
      { prefix: '/v1' },
    );
    await app.register(
      async (v2) => {
        await v2.register(idempotencyPlugin, { store: memoryStore(), headerName: 'x-request-key' });
        v2.post('/payments', handler);
      },
      { prefix: '/v2' },
    );
    // Before, every registration took the others' routes (listed with a capture hook of the same name)
    // for its own declared before it: ready() failed with "POST /v1/payments … was declared before the
    // plugin".
    await expect(app.ready()).resolves.toBeDefined();
    const required = await app.inject({ method: 'POST', url: '/v1/payments' });
    expect(required.statusCode).toBe(400);
    const optional = await app.inject({ method: 'POST', url: '/v2/payments' });
    expect(optional.statusCode).toBe(200);
    const badKey = await app.inject({
      method: 'POST',
      url: '/v2/payments',
      headers: { 'x-request-key': '' },
    });
    expect(badKey.statusCode).toBe(400);
    await app.close();
  });

  it('refuses a registration in a scope whose enclosing scope has one: each request would be claimed twice', async () => {
    const app = fastify();
    const store = memoryStore();
    await app.register(idempotencyPlugin, { store });
    app.register(async (v1) => {
      await v1.register(idempotencyPlugin, { store, key: 'required' });
      v1.post('/v1/payments', handler);
    });
    // Before, both layers claimed each request of /v1 in the same store: every keyed request got 409.
    await expect(app.ready()).rejects.toThrow(
      /idempotencyPlugin: already registered in this scope or an enclosing one/,
    );
  });

  it('still fails ready() for a route declared before the registration of its own scope', async () => {
    const app = fastify();
    await app.register(async (v1) => {
      v1.post('/v1/early', handler);
      await v1.register(idempotencyPlugin, { store: memoryStore(), key: 'required' });
      v1.post('/v1/late', handler);
    });
    await expect(app.ready()).rejects.toThrow(/POST \/v1\/early was declared before the plugin/);
  });

  it('reads full paths from printRoutes, nested and with constraint variants', () => {
    const hook = `• (onSend) ["${CAPTURE_HOOK_NAME}()"]`;
    const tree = [
      '├── /x (POST) {"version":"1.0.0"}',
      `│   ${hook}`,
      '│   /x (POST)',
      `│   ${hook}`,
      '└── /v1 (POST)',
      '    └── / (POST)',
      `        ${hook}`,
      '        └── child (POST)',
    ].join('\n');
    expect(listedRoutes(tree, 'POST')).toEqual([
      { path: '/x', inScope: true },
      { path: '/x', inScope: true },
      { path: '/v1', inScope: false },
      { path: '/v1/', inScope: true },
      { path: '/v1/child', inScope: false },
    ]);
  });
});
