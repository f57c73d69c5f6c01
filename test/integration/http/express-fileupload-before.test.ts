/**
 * express-fileupload mounted before the middleware: it has read the stream, left the text fields in
 * `req.body` and put the files in `req.files` by field name (a file, or an array of them), with their
 * bytes in `data` or, with `useTempFiles`, in a file at `tempFilePath` (`data` is then empty). Its files
 * carry `name`, not multer's `originalname`, and no `buffer`: the fingerprint saw only their type and
 * size, so another file of the same size under the same key was replayed the first file's answer. It now
 * covers each file's field, name, type, size and bytes, on Express 5 and 4.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import fileUpload, { type UploadedFile } from 'express-fileupload';
import express4 from 'express4';
import { afterAll, describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenExpress } from '../../helpers/listen-express.js';
import { postWithKey } from '../../helpers/post-with-key.js';

const tempDir = mkdtempSync(join(tmpdir(), 'idem-fileupload-'));
afterAll(() => rmSync(tempDir, { recursive: true, force: true }));

type Express = typeof express | typeof express4;

/** An app with express-fileupload (in memory, or with temporary files) before the middleware. */
async function start(framework: Express, useTempFiles: boolean): Promise<string> {
  const app = framework();
  app.use(fileUpload(useTempFiles ? { useTempFiles, tempFileDir: tempDir } : {}));
  app.use(idempotency({ store: memoryStore(), key: 'required', requestBodyLimit: 64 }));
  let n = 0;
  // The handler reads every file as express-fileupload left it: the layer must not have used it up.
  app.post('/evidence', async (req, res) => {
    const files = Object.values(req.files ?? {}).flat() as UploadedFile[];
    const contents = await Promise.all(
      files.map((f) => (useTempFiles ? readFile(f.tempFilePath, 'utf8') : f.data.toString())),
    );
    res
      .status(201)
      .json({ n: ++n, note: (req.body as { note?: string } | undefined)?.note, contents });
  });
  return listenExpress(app);
}

type Part = [field: string, content: string, filename?: string];

// A new FormData each time: each request has its own random boundary, as a client's retry does.
async function post(url: string, key: string, parts: Part[]) {
  const form = new FormData();
  for (const [field, content, filename] of parts) {
    if (filename === undefined) form.append(field, content);
    else form.append(field, new Blob([content], { type: 'application/pdf' }), filename);
  }
  return postWithKey<{ n?: number; code?: string; contents?: string[] }>(
    `${url}/evidence`,
    key,
    form,
  );
}

describe.each([
  ['express 5', express],
  ['express 4', express4],
] as Array<[string, Express]>)(
  'express-fileupload before the middleware (%s)',
  (_name, framework) => {
    it.each([
      ['in memory', false],
      ['with useTempFiles', true],
    ])(
      '%s: another file of the same name and size under the key is a 422, the same file a replay',
      async (_mode, temp) => {
        // Arrange
        const url = await start(framework, temp);
        const first = await post(url, 'k-1', [
          ['receipt', 'AAAA', 'receipt.pdf'],
          ['note', 'pay'],
        ]);
        // Act
        const retry = await post(url, 'k-1', [
          ['receipt', 'AAAA', 'receipt.pdf'],
          ['note', 'pay'],
        ]);
        const other = await post(url, 'k-1', [
          ['receipt', 'BBBB', 'receipt.pdf'],
          ['note', 'pay'],
        ]);
        // Assert
        expect(first).toMatchObject({ status: 201, body: { n: 1, contents: ['AAAA'] } });
        expect(retry).toMatchObject({ status: 201, replayed: 'true', body: first.body });
        expect(other.status).toBe(422);
      },
    );

    it.each([
      ['in memory', false],
      ['with useTempFiles', true],
    ])(
      '%s: covers each file of a field sent several times, and the file names',
      async (_mode, temp) => {
        const url = await start(framework, temp);
        const pages: Part[] = [
          ['page', 'one', 'p1.pdf'],
          ['page', 'two', 'p2.pdf'],
        ];
        expect((await post(url, 'k-pages', pages)).body.contents).toEqual(['one', 'two']);
        expect((await post(url, 'k-pages', pages)).replayed).toBe('true');
        const otherBytes = await post(url, 'k-pages', [
          ['page', 'one', 'p1.pdf'],
          ['page', 'owt', 'p2.pdf'],
        ]);
        const otherName = await post(url, 'k-pages', [
          ['page', 'one', 'p1.pdf'],
          ['page', 'two', 'p3.pdf'],
        ]);
        expect(otherBytes.status).toBe(422);
        expect(otherName.status).toBe(422);
      },
    );

    it('with useTempFiles: files over requestBodyLimit are refused with 413, nothing run', async () => {
      const url = await start(framework, true);
      const large = await post(url, 'k-large', [['receipt', 'x'.repeat(65), 'receipt.pdf']]);
      expect(large).toMatchObject({ status: 413, body: { code: 'request_too_large' } });
    });
  },
);
