/**
 * The body of Express's `transactionalRoute`, which fingerprinted `req.body` alone:
 * - behind multer, which has read the stream and left only the text fields in `req.body`, the files in
 *   `req.file`/`req.files`: another file under the same key was replayed the first file's answer. The
 *   files are now covered as the middleware covers them (field, name, type, size and the bytes, in memory
 *   or on disk);
 * - without a parser, the handler reading the stream itself (PostgreSQL, an async handler): no body was
 *   fingerprinted, and another body was replayed. It is now read for the fingerprint as the middleware
 *   reads it (within its default `requestBodyLimit`, 1 MiB) and handed back to the stream.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import express from 'express';
import multer from 'multer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { transactionalRoute } from '../../../src/express/index.js';
import { postgresTransactional } from '../../../src/postgres/index.js';
import { sqliteTransactional } from '../../../src/sqlite/index.js';
import { listenExpress } from '../../helpers/listen-express.js';
import { postWithKey } from '../../helpers/post-with-key.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

const uploadDir = mkdtempSync(join(tmpdir(), 'idem-tx-uploads-'));
afterAll(() => rmSync(uploadDir, { recursive: true, force: true }));

/** A route that stores one evidence row per upload, in the transaction of its idempotency record. */
async function start(storage: multer.StorageEngine): Promise<string> {
  const database = new Database(':memory:');
  database.exec('CREATE TABLE evidence (id INTEGER PRIMARY KEY, name TEXT)');
  const insert = database.prepare('INSERT INTO evidence (name) VALUES (?)');
  const app = express();
  app.post(
    '/evidence',
    multer({ storage }).single('file'),
    // The file is read before the route answers: on disk, the layer has left it whole.
    async (req, _res, next) => {
      const file = req.file as Express.Multer.File;
      (req as { content?: string }).content =
        file.buffer === undefined ? await readFile(file.path, 'utf8') : file.buffer.toString();
      next();
    },
    transactionalRoute(sqliteTransactional({ database }), (req) => {
      const { lastInsertRowid } = insert.run(req.file?.originalname);
      return {
        status: 201,
        body: { id: Number(lastInsertRowid), content: (req as { content?: string }).content },
      };
    }),
  );
  return listenExpress(app);
}

async function post(url: string, key: string, content: string) {
  const form = new FormData();
  form.append('file', new Blob([content], { type: 'application/pdf' }), 'receipt.pdf');
  return postWithKey<{ id?: number; content?: string }>(`${url}/evidence`, key, form);
}

describe.each([
  ['memory storage', () => multer.memoryStorage()],
  ['disk storage', () => multer.diskStorage({ destination: uploadDir })],
])('transactionalRoute behind multer (%s)', (_name, storage) => {
  it('refuses another file of the same name and size under the key with 422, replays the same file', async () => {
    // Arrange
    const url = await start(storage());
    const first = await post(url, 'k-evidence', 'AAAA');
    // Act
    const retry = await post(url, 'k-evidence', 'AAAA');
    const other = await post(url, 'k-evidence', 'BBBB');
    // Assert
    expect(first).toMatchObject({ status: 201, body: { id: 1, content: 'AAAA' } });
    expect(retry).toMatchObject({ status: 201, replayed: 'true', body: first.body });
    expect(other.status).toBe(422);
  });
});

describe('transactionalRoute whose handler reads the stream (PostgreSQL)', () => {
  let fx: PostgresFixture;
  beforeAll(async () => {
    fx = await setupPostgres('txbody', { max: 4 });
    await fx.pool.query(`CREATE TABLE "${fx.schema}".imports (id serial PRIMARY KEY, csv text)`);
  });
  afterAll(() => fx.dispose());

  async function startImports(): Promise<string> {
    const app = express();
    app.post(
      '/imports',
      transactionalRoute(
        postgresTransactional({ pool: fx.pool, schema: fx.schema }),
        async (req, tx) => {
          const chunks: Buffer[] = [];
          for await (const chunk of req) chunks.push(chunk as Buffer);
          const csv = Buffer.concat(chunks).toString();
          const { rows } = await tx.query(
            `INSERT INTO "${fx.schema}".imports (csv) VALUES ($1) RETURNING id`,
            [csv],
          );
          return { status: 201, body: { id: (rows[0] as { id: number }).id, csv } };
        },
      ),
    );
    return listenExpress(app);
  }

  async function postCsv(url: string, key: string, csv: string) {
    return postWithKey<{ id?: number; csv?: string; code?: string }>(`${url}/imports`, key, csv, {
      'content-type': 'text/csv',
    });
  }

  it('refuses another body under the key with 422, replays the same body; the handler reads it whole', async () => {
    // Arrange
    const url = await startImports();
    const first = await postCsv(url, 'k-import', 'a,b\n1,2');
    // Act
    const retry = await postCsv(url, 'k-import', 'a,b\n1,2');
    const other = await postCsv(url, 'k-import', 'a,b\n9,9');
    // Assert
    expect(first).toMatchObject({ status: 201, body: { csv: 'a,b\n1,2' } });
    expect(retry).toMatchObject({ status: 201, replayed: 'true', body: first.body });
    expect(other.status).toBe(422);
  });

  it('refuses a body over 1 MiB with 413 request_too_large, nothing committed', async () => {
    const url = await startImports();
    const large = await postCsv(url, 'k-large', 'x'.repeat(1024 * 1024 + 1));
    expect(large).toMatchObject({ status: 413, body: { code: 'request_too_large' } });
    const { rows } = await fx.pool.query(`SELECT count(*)::int AS n FROM "${fx.schema}".imports`);
    expect(rows[0]).toEqual({ n: 1 });
  });
});
