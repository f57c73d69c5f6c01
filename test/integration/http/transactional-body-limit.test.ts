/**
 * `requestBodyLimit` on the Express and Fastify transactional routes. They read the bodies the middleware
 * reads (a body no parser read, a stream in the body, files on disk) with a fixed limit, the default
 * 1 MiB, and refused the option: an upload over 1 MiB was answered 413 on every try, with no way to raise
 * the limit or leave the body out; files on disk were hashed whole, however large. The option is now the
 * middleware's: a larger limit fingerprints a larger body, a body over it is 413 with nothing committed,
 * `false` leaves the body unread and out of the fingerprint (files on disk: name, type and size only), and
 * files on disk count against it as with the middleware.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import multipart from '@fastify/multipart';
import Database from 'better-sqlite3';
import express from 'express';
import fastify from 'fastify';
import multer from 'multer';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { transactionalRoute } from '../../../src/express/index.js';
import { transactionalRoute as fastifyRoute } from '../../../src/fastify/index.js';
import { postgresTransactional } from '../../../src/postgres/index.js';
import { sqliteTransactional } from '../../../src/sqlite/index.js';
import { listenExpress } from '../../helpers/listen-express.js';
import { postWithKey } from '../../helpers/post-with-key.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

const MiB = 1024 * 1024;
const uploadDir = mkdtempSync(join(tmpdir(), 'idem-tx-body-limit-'));
afterAll(() => rmSync(uploadDir, { recursive: true, force: true }));

type Answer = { status: number; replayed: string | null; body: { id?: number; code?: string } };

/** A SQLite database with one table, and its row count. */
function evidenceTable() {
  const database = new Database(':memory:');
  database.exec('CREATE TABLE evidence (id INTEGER PRIMARY KEY)');
  const insert = database.prepare('INSERT INTO evidence DEFAULT VALUES');
  const count = database.prepare('SELECT count(*) AS n FROM evidence');
  return {
    transactional: sqliteTransactional({ database }),
    answer: () => ({ status: 201, body: { id: Number(insert.run().lastInsertRowid) } }),
    rows: () => (count.get() as { n: number }).n,
  };
}

// A new FormData each time: a new random boundary, as a client's retry has.
async function upload(url: string, key: string, file: string): Promise<Answer> {
  const form = new FormData();
  form.append('receipt', new Blob([file], { type: 'application/pdf' }), 'receipt.pdf');
  return postWithKey<Answer['body']>(`${url}/evidence`, key, form);
}

describe('Express transactionalRoute requestBodyLimit, multer disk storage before it (SQLite)', () => {
  async function start(options?: Parameters<typeof transactionalRoute>[2]) {
    const table = evidenceTable();
    const app = express();
    app.post(
      '/evidence',
      multer({ storage: multer.diskStorage({ destination: uploadDir }) }).single('receipt'),
      transactionalRoute(table.transactional, table.answer, options),
    );
    return { url: await listenExpress(app), rows: table.rows };
  }

  it('fingerprints a 2 MiB file under a 4 MiB limit: 201, the replay, 422 for another file', async () => {
    // Arrange
    const { url, rows } = await start({ requestBodyLimit: 4 * MiB });
    const first = await upload(url, 'k-big', 'A'.repeat(2 * MiB));
    // Act
    const retry = await upload(url, 'k-big', 'A'.repeat(2 * MiB));
    const other = await upload(url, 'k-big', 'B'.repeat(2 * MiB));
    // Assert
    expect(first).toMatchObject({ status: 201, replayed: null, body: { id: 1 } });
    expect(retry).toMatchObject({ status: 201, replayed: 'true', body: first.body });
    expect(other).toMatchObject({ status: 422, body: { code: 'key_mismatch' } });
    expect(rows()).toBe(1);
  });

  it('answers files over the limit 413 request_too_large, nothing committed (default: 1 MiB, as the middleware)', async () => {
    const limited = await start({ requestBodyLimit: 64 * 1024 });
    const byDefault = await start();
    expect(await upload(limited.url, 'k-over', 'A'.repeat(100 * 1024))).toMatchObject({
      status: 413,
      body: { code: 'request_too_large' },
    });
    expect(await upload(byDefault.url, 'k-over', 'A'.repeat(MiB + 1))).toMatchObject({
      status: 413,
      body: { code: 'request_too_large' },
    });
    expect(limited.rows() + byDefault.rows()).toBe(0);
  });

  it('false: covers files on disk by name, type and size, their bytes unread', async () => {
    // Arrange
    const { url, rows } = await start({ requestBodyLimit: false });
    const first = await upload(url, 'k-unread', 'A'.repeat(2 * MiB));
    // Act
    const sameSize = await upload(url, 'k-unread', 'B'.repeat(2 * MiB));
    const otherSize = await upload(url, 'k-unread', 'B'.repeat(2 * MiB + 1));
    // Assert
    expect(first).toMatchObject({ status: 201, body: { id: 1 } });
    expect(sameSize).toMatchObject({ status: 201, replayed: 'true', body: first.body });
    expect(otherSize.status).toBe(422);
    expect(rows()).toBe(1);
  });
});

describe('Fastify transactionalRoute requestBodyLimit, @fastify/multipart (SQLite)', () => {
  async function start(options?: Parameters<typeof fastifyRoute>[2]) {
    const table = evidenceTable();
    const app = fastify({ forceCloseConnections: true });
    onTestFinished(() => app.close());
    await app.register(multipart);
    app.post('/evidence', fastifyRoute(table.transactional, table.answer, options));
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    return { url, rows: table.rows };
  }

  it('fingerprints a 2 MiB upload under a 4 MiB limit: 201, the replay, 422 for another upload', async () => {
    // Arrange
    const { url, rows } = await start({ requestBodyLimit: 4 * MiB });
    const first = await upload(url, 'k-big', 'A'.repeat(2 * MiB));
    // Act
    const retry = await upload(url, 'k-big', 'A'.repeat(2 * MiB));
    const other = await upload(url, 'k-big', 'B'.repeat(2 * MiB));
    // Assert
    expect(first).toMatchObject({ status: 201, replayed: null, body: { id: 1 } });
    expect(retry).toMatchObject({ status: 201, replayed: 'true', body: first.body });
    expect(other).toMatchObject({ status: 422, body: { code: 'key_mismatch' } });
    expect(rows()).toBe(1);
  });

  it('answers an upload over the limit 413 request_too_large, nothing committed', async () => {
    const { url, rows } = await start({ requestBodyLimit: 64 * 1024 });
    const large = await upload(url, 'k-over', 'A'.repeat(100 * 1024));
    expect(large).toMatchObject({ status: 413, body: { code: 'request_too_large' } });
    expect(rows()).toBe(0);
  });

  it('false: leaves the upload unread and out of the fingerprint', async () => {
    // Arrange
    const { url, rows } = await start({ requestBodyLimit: false });
    const first = await upload(url, 'k-unread', 'A'.repeat(2 * MiB));
    // Act
    const other = await upload(url, 'k-unread', 'B'.repeat(3 * MiB));
    // Assert
    expect(first).toMatchObject({ status: 201, body: { id: 1 } });
    expect(other).toMatchObject({ status: 201, replayed: 'true', body: first.body });
    expect(rows()).toBe(1);
  });
});

describe('Express transactionalRoute requestBodyLimit, a handler that reads the stream (PostgreSQL)', () => {
  let fx: PostgresFixture;
  beforeAll(async () => {
    fx = await setupPostgres('txlimit', { max: 4 });
    await fx.pool.query(`CREATE TABLE "${fx.schema}".imports (id serial PRIMARY KEY, size int)`);
  });
  afterAll(() => fx.dispose());

  async function start(options: Parameters<typeof transactionalRoute>[2]) {
    const app = express();
    app.post(
      '/imports',
      transactionalRoute(
        postgresTransactional({ pool: fx.pool, schema: fx.schema }),
        async (req, tx) => {
          let size = 0;
          for await (const chunk of req) size += (chunk as Buffer).byteLength;
          const { rows } = await tx.query(
            `INSERT INTO "${fx.schema}".imports (size) VALUES ($1) RETURNING id, size`,
            [size],
          );
          return { status: 201, body: rows[0] };
        },
        options,
      ),
    );
    return listenExpress(app);
  }

  async function post(url: string, key: string, csv: string) {
    return postWithKey<{ id?: number; size?: number; code?: string }>(`${url}/imports`, key, csv, {
      'content-type': 'text/csv',
    });
  }

  const rows = async () => {
    const { rows } = await fx.pool.query(`SELECT count(*)::int AS n FROM "${fx.schema}".imports`);
    return (rows[0] as { n: number }).n;
  };

  it('fingerprints a 2 MiB body under a 4 MiB limit, handed whole to the handler; over the limit: 413, nothing committed', async () => {
    // Arrange
    const url = await start({ requestBodyLimit: 4 * MiB });
    const first = await post(url, 'k-big', 'a'.repeat(2 * MiB));
    // Act
    const retry = await post(url, 'k-big', 'a'.repeat(2 * MiB));
    const other = await post(url, 'k-big', 'b'.repeat(2 * MiB));
    const over = await post(url, 'k-over', 'a'.repeat(4 * MiB + 1));
    // Assert
    expect(first).toMatchObject({ status: 201, replayed: null, body: { size: 2 * MiB } });
    expect(retry).toMatchObject({ status: 201, replayed: 'true', body: first.body });
    expect(other).toMatchObject({ status: 422, body: { code: 'key_mismatch' } });
    expect(over).toMatchObject({ status: 413, body: { code: 'request_too_large' } });
    expect(await rows()).toBe(1);
  });
});
