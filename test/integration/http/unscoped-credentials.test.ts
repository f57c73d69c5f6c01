/**
 * A request the default scope puts in the empty scope (no Authorization, no cookies) while it carries a
 * header that usually identifies the caller (`X-API-Key`, a proxy's authenticated-user header) draws one
 * process warning naming the header and the fix: its callers all share one scope, and one can be replayed
 * another's response. Once per process; never for a request with credentials the scope digests, nor on a
 * route that names the header in `scopeHeaders`. On the middleware and on a transactional route (each test
 * loads the package afresh: the warning is once per process, per module instance).
 */
import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import express from 'express';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { listenExpress } from '../../helpers/listen-express.js';

/** The package's Express adapter and stores, loaded afresh (a module instance that has not warned). */
async function freshPackage() {
  vi.resetModules();
  const [adapter, core, sqlite] = await Promise.all([
    import('../../../src/express/index.js'),
    import('../../../src/index.js'),
    import('../../../src/sqlite/index.js'),
  ]);
  return { ...adapter, ...core, ...sqlite };
}

/** The warnings this process emits from now on, with the code the layer gives its own. */
function recordWarnings() {
  const seen: Array<Error & { code?: string }> = [];
  const listener = (warning: Error & { code?: string }) => {
    if (warning.code === 'IDEMPOTENCY_KIT_UNSCOPED_CREDENTIALS') seen.push(warning);
  };
  process.on('warning', listener);
  afterEach(() => void process.off('warning', listener));
  return seen;
}

/** Warnings are emitted on the next tick. */
const settled = () => new Promise((resolve) => setTimeout(resolve, 20));

const post = (url: string, headers: Record<string, string>) =>
  fetch(`${url}/payments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': randomUUID(), ...headers },
    body: '{"amount":100}',
  });

describe('a request whose credentials the default scope does not digest', () => {
  it('draws one warning naming the header and scopeHeaders, once per process', async () => {
    // Arrange
    const kit = await freshPackage();
    const seen = recordWarnings();
    const app = express();
    app.use(express.json(), kit.idempotency({ store: kit.memoryStore() }));
    app.post('/payments', (_req, res) => void res.status(201).json({ ok: true }));
    const url = await listenExpress(app);

    // Act: with Authorization beside the key (digested: no warning), then twice without.
    const digested = await post(url, { authorization: 'Bearer a', 'x-api-key': 'sk_alice' });
    await settled();
    const before = seen.length;
    const first = await post(url, { 'x-api-key': 'sk_alice' });
    const second = await post(url, { 'X-Api-Key': 'sk_mallory' });
    await settled();

    // Assert
    expect([digested.status, first.status, second.status]).toEqual([201, 201, 201]);
    expect(before).toBe(0);
    expect(seen).toHaveLength(1);
    expect(seen[0]?.message).toMatch(/carries x-api-key, which the default scope does not digest/);
    expect(seen[0]?.message).toMatch(/scopeHeaders: \['x-api-key'\]/);
  });

  it('stays quiet on a route that names the header in scopeHeaders, and without such a header', async () => {
    // Arrange
    const kit = await freshPackage();
    const seen = recordWarnings();
    const app = express();
    app.use(
      express.json(),
      kit.idempotency({ store: kit.memoryStore(), scopeHeaders: ['X-API-Key'] }),
    );
    app.post('/payments', (_req, res) => void res.status(201).json({ ok: true }));
    const url = await listenExpress(app);

    // Act
    await post(url, { 'x-api-key': 'sk_alice' });
    await post(url, {});
    await settled();

    // Assert
    expect(seen).toEqual([]);
  });

  it('draws the warning on a transactional route too', async () => {
    // Arrange
    const kit = await freshPackage();
    const seen = recordWarnings();
    const database = new Database(':memory:');
    const route = kit.transactionalRoute(kit.sqliteTransactional({ database }), () => ({
      status: 201,
      body: { ok: true },
    }));
    const app = express();
    app.post('/payments', express.json(), route);
    const url = await listenExpress(app);

    // Act
    const response = await post(url, { 'x-forwarded-user': 'alice@example.com' });
    await settled();
    database.close();

    // Assert
    expect(response.status).toBe(201);
    expect(seen).toHaveLength(1);
    expect(seen[0]?.message).toMatch(/carries x-forwarded-user/);
  });
});
