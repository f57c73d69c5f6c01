/**
 * Fastify's `transactionalRoute` behind `@fastify/multipart`: its parser only marks the request and leaves
 * `request.body` undefined (the handler reads `request.raw` through `request.file()`), so the route
 * fingerprinted no body, and another upload under the same key was replayed the first upload's answer.
 * The route now reads such a body for the fingerprint as the plugin does (within the plugin's default
 * `requestBodyLimit`, 1 MiB: larger is 413) and hands it back to `request.raw`.
 */
import type { AddressInfo } from 'node:net';
import multipart from '@fastify/multipart';
import Database from 'better-sqlite3';
import fastify from 'fastify';
import { describe, expect, it, onTestFinished } from 'vitest';
import { transactionalRoute } from '../../../src/fastify/index.js';
import { sqliteTransactional } from '../../../src/sqlite/index.js';
import { postWithKey } from '../../helpers/post-with-key.js';

/** A route that stores one row per upload, in the transaction of its idempotency record. */
async function start(): Promise<{ url: string; rows: () => number }> {
  const database = new Database(':memory:');
  database.exec('CREATE TABLE evidence (id INTEGER PRIMARY KEY)');
  const insert = database.prepare('INSERT INTO evidence DEFAULT VALUES');
  const app = fastify({ forceCloseConnections: true });
  onTestFinished(() => app.close());
  await app.register(multipart);
  app.post(
    '/evidence',
    transactionalRoute(sqliteTransactional({ database }), () => ({
      status: 201,
      body: { id: Number(insert.run().lastInsertRowid) },
    })),
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  const count = database.prepare('SELECT count(*) AS n FROM evidence');
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    rows: () => (count.get() as { n: number }).n,
  };
}

// A new FormData each time: a new random boundary, as a client's retry has.
async function post(url: string, key: string, file: string) {
  const form = new FormData();
  form.append('receipt', new Blob([file], { type: 'application/pdf' }), 'receipt.pdf');
  return postWithKey<{ id?: number; code?: string }>(`${url}/evidence`, key, form);
}

describe('Fastify transactionalRoute behind @fastify/multipart', () => {
  it('refuses another upload under the key with 422, replays the same upload', async () => {
    // Arrange
    const { url, rows } = await start();
    const first = await post(url, 'k-evidence', 'AAAA');
    // Act
    const retry = await post(url, 'k-evidence', 'AAAA');
    const other = await post(url, 'k-evidence', 'BBBB');
    // Assert
    expect(first).toMatchObject({ status: 201, body: { id: 1 } });
    expect(retry).toMatchObject({ status: 201, replayed: 'true', body: first.body });
    expect(other.status).toBe(422);
    expect(rows()).toBe(1);
  });

  it('refuses an upload over 1 MiB with 413 request_too_large, nothing committed', async () => {
    const { url, rows } = await start();
    const large = await post(url, 'k-large', 'x'.repeat(1024 * 1024 + 1));
    expect(large).toMatchObject({ status: 413, body: { code: 'request_too_large' } });
    expect(rows()).toBe(0);
  });
});
