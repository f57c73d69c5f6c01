/**
 * A transactional route keys a scope under a reserved prefix (`consumer:orders`) apart from the consumers'
 * records, as the middleware does (reserved-scopes.ts), and docs/http.md ("Reserved scopes") says to look
 * such a record up with `storageKeyFor(key, scope, { http: true })`. The transactional modes' own
 * `storageKeyFor` took no options: it answered the consumer's key, where the route's record is not, and
 * nothing in code could find it (only the CLI's `inspect --http`).
 *
 * On a SQLite file: the mode's `storageKeyFor` against the key the route's record is stored under.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { transactionalHandler } from '../../../src/fetch/index.js';
import { createIdempotency } from '../../../src/index.js';
import { sqliteStore, sqliteTransactional } from '../../../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-transactional-lookup-'));
const database = new Database(join(dir, 'records.db'));
const store = sqliteStore({ database });

afterAll(() => {
  database.close();
  rmSync(dir, { recursive: true, force: true });
});

const post = (key: string, tenant: string) =>
  new Request('http://localhost/orders', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key, 'x-tenant': tenant },
    body: '{"item":"book"}',
  });

describe("a transactional mode's storageKeyFor", () => {
  it("finds a transactional route's record under a reserved-looking scope with { http: true }", async () => {
    // Arrange
    const mode = sqliteTransactional({ database });
    const POST = transactionalHandler(mode, () => ({ status: 201, body: { order: 'created' } }), {
      scope: (request) => request.headers.get('x-tenant') ?? 'none',
    });
    expect((await POST(post('order-2001', 'consumer:orders'))).status).toBe(201);
    // Where the engine (same namespace) says an HTTP route's record of it is.
    const routeKey = createIdempotency({ store }).storageKeyFor('order-2001', 'consumer:orders', {
      http: true,
    });
    // Act
    const viaMode = mode.storageKeyFor('order-2001', 'consumer:orders', { http: true });
    // Assert
    expect((await store.get(routeKey))?.status).toBe('completed');
    expect(viaMode).toBe(routeKey);
    // Without it, the consumer's key, as before (a run() caller's scope is not an HTTP route's).
    expect(mode.storageKeyFor('order-2001', 'consumer:orders')).not.toBe(routeKey);
  });
});
