/**
 * multer mounted before the middleware (the "after body parsing" order): multer has read the stream and put
 * the files in `req.file`/`req.files` (memory storage: `buffer`; disk storage: `path`, `size`), leaving only
 * the text fields in `req.body`. The fingerprint saw no file, so a different file under the same key was
 * replayed the first file's answer. The files are now part of the fingerprint: field name, original name,
 * mime type, size and a SHA-256 of the bytes (memory storage: the buffer; disk storage: the file, read
 * back up to `requestBodyLimit`). Requests without files keep their fingerprints exactly (stored keys
 * must not turn into 422).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import multer from 'multer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { memoryStore, type Store } from '../../../src/index.js';
import { postWithKey } from '../../helpers/post-with-key.js';

interface Server {
  url: string;
  /** The fingerprint of each claim, in order. */
  fingerprints: string[];
  close(): Promise<void>;
}

// A memory store that records the fingerprint of every claim.
function recordingStore(fingerprints: string[]): Store {
  const inner = memoryStore();
  return new Proxy(inner, {
    get(target, property) {
      if (property === 'claim') {
        return (key: string, options: Parameters<Store['claim']>[1]) => {
          fingerprints.push(options.fingerprint);
          return target.claim(key, options);
        };
      }
      const value = Reflect.get(target, property) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

const uploadDir = mkdtempSync(join(tmpdir(), 'idem-multer-'));

async function start(): Promise<Server> {
  const fingerprints: string[] = [];
  const app = express();
  const idem = idempotency({ store: recordingStore(fingerprints), batch: false, cache: false });
  const required = idem.route({ key: 'required' });
  let n = 0;
  const answer = (req: express.Request, res: express.Response) => {
    const files = [req.file ?? [], Object.values(req.files ?? {})].flat(2) as Express.Multer.File[];
    res.status(201).json({ n: ++n, files: files.map((f) => [f.originalname, f.size]) });
  };
  const memory = multer({ storage: multer.memoryStorage() });
  const disk = multer({ storage: multer.diskStorage({ destination: uploadDir }) });
  app.post('/single', memory.single('file'), required, answer);
  app.post('/array', memory.array('file'), required, answer);
  app.post('/fields', memory.fields([{ name: 'front' }, { name: 'back' }]), required, answer);
  app.post('/disk', disk.single('file'), required, answer);
  // The handler reads the files multer wrote: the layer read them too, and must leave them whole.
  const contents = async (req: express.Request, res: express.Response) => {
    const files = [req.file ?? [], Object.values(req.files ?? {})].flat(2) as Express.Multer.File[];
    const read = await Promise.all(files.map((f) => readFile(f.path, 'utf8')));
    res.status(201).json({ n: ++n, contents: read });
  };
  app.post('/disk-read', disk.single('file'), required, contents);
  app.post('/disk-any', disk.any(), required, contents);
  app.post('/disk-fields', disk.fields([{ name: 'front' }, { name: 'back' }]), required, contents);
  app.post(
    '/disk-small',
    disk.any(),
    idem.route({ key: 'required', requestBodyLimit: 8 }),
    contents,
  );
  app.post('/none', memory.none(), required, answer);
  app.post('/no-file', memory.array('file'), required, answer);
  app.post('/json', express.json(), required, answer);
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    fingerprints,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

let server: Server;
beforeAll(async () => {
  server = await start();
});
afterAll(async () => {
  await server.close();
  rmSync(uploadDir, { recursive: true, force: true });
});

type Part = [field: string, content: string, filename?: string, type?: string];

// A new FormData each time: each request has its own random boundary, as a client's retry does.
async function post(path: string, key: string, parts: Part[]) {
  const form = new FormData();
  for (const [field, content, filename, type] of parts) {
    if (filename === undefined) form.append(field, content);
    else form.append(field, new Blob([content], type ? { type } : {}), filename);
  }
  return postWithKey<{ n?: number; code?: string }>(`${server.url}${path}`, key, form);
}

describe('multer before the middleware', () => {
  it('refuses a different file (same name, note and key) with 422 instead of replaying', async () => {
    // Arrange
    const first = await post('/single', 'k-single', [
      ['file', 'AAAA', 'invoice.pdf'],
      ['note', 'pay'],
    ]);
    // Act
    const other = await post('/single', 'k-single', [
      ['file', 'BBBB', 'invoice.pdf'],
      ['note', 'pay'],
    ]);
    // Assert
    expect(first.status).toBe(201);
    expect(other.status).toBe(422);
  });

  it('replays a retry of the same file, under a new boundary', async () => {
    const parts: Part[] = [
      ['file', 'same bytes', 'a.txt', 'text/plain'],
      ['note', 'x'],
    ];
    const first = await post('/single', 'k-retry', parts);
    const retry = await post('/single', 'k-retry', parts);
    expect(retry.status).toBe(201);
    expect(retry.replayed).toBe('true');
    expect(retry.body).toEqual(first.body);
  });

  it.each([
    ['name', '/single', ['file', 'AAAA', 'invoice.pdf'], ['file', 'AAAA', 'other.pdf']],
    [
      'type',
      '/single',
      ['file', 'AAAA', 'a.pdf', 'application/pdf'],
      ['file', 'AAAA', 'a.pdf', 'image/png'],
    ],
    ['field', '/fields', ['front', 'AAAA', 'page.png'], ['back', 'AAAA', 'page.png']],
  ] as Array<[string, string, Part, Part]>)(
    'refuses the same bytes under another %s',
    async (what, path, first, changed) => {
      expect((await post(path, `k-${what}`, [first])).status).toBe(201);
      expect((await post(path, `k-${what}`, [changed])).status).toBe(422);
    },
  );

  it('covers req.files of fields(): a different back page is a 422, the same pages a replay', async () => {
    const pages: Part[] = [
      ['front', 'front page', 'front.png'],
      ['back', 'back page', 'back.png'],
    ];
    expect((await post('/fields', 'k-fields', pages)).status).toBe(201);
    expect((await post('/fields', 'k-fields', pages)).replayed).toBe('true');
    const other = await post('/fields', 'k-fields', [
      ['front', 'front page', 'front.png'],
      ['back', 'another back', 'back.png'],
    ]);
    expect(other.status).toBe(422);
  });

  it('disk storage: a file of another size is a 422', async () => {
    expect((await post('/disk', 'k-disk', [['file', 'AAAA', 'a.pdf']])).status).toBe(201);
    expect((await post('/disk', 'k-disk', [['file', 'AAAA', 'a.pdf']])).replayed).toBe('true');
    expect((await post('/disk', 'k-disk', [['file', 'AAAAAAAA', 'a.pdf']])).status).toBe(422);
  });

  it('disk storage: the same name and size with other bytes is a 422, and the handler reads the file whole', async () => {
    // Arrange
    const first = await post('/disk-read', 'k-disk-bytes', [['file', 'AAAA', 'invoice.pdf']]);
    // Act
    const retry = await post('/disk-read', 'k-disk-bytes', [['file', 'AAAA', 'invoice.pdf']]);
    const other = await post('/disk-read', 'k-disk-bytes', [['file', 'BBBB', 'invoice.pdf']]);
    // Assert
    expect(first).toMatchObject({ status: 201, body: { contents: ['AAAA'] } });
    expect(retry).toMatchObject({ status: 201, replayed: 'true', body: first.body });
    expect(other.status).toBe(422);
  });

  it('disk storage: covers the bytes of every file of any() and fields()', async () => {
    const pages: Part[] = [
      ['front', 'front', 'front.png'],
      ['back', 'back1', 'back.png'],
    ];
    const changed: Part[] = [
      ['front', 'front', 'front.png'],
      ['back', 'back2', 'back.png'],
    ];
    for (const path of ['/disk-any', '/disk-fields']) {
      const first = await post(path, `k${path}`, pages);
      expect(first).toMatchObject({ status: 201, body: { contents: ['front', 'back1'] } });
      expect((await post(path, `k${path}`, pages)).replayed).toBe('true');
      expect((await post(path, `k${path}`, changed)).status).toBe(422);
    }
  });

  it('disk storage: files over requestBodyLimit together are refused with 413, nothing run', async () => {
    const small = await post('/disk-small', 'k-disk-small', [['file', '12345678', 'a.bin']]);
    const large = await post('/disk-small', 'k-disk-large', [
      ['file', '12345', 'a.bin'],
      ['file', '6789', 'b.bin'],
    ]);
    expect(small.status).toBe(201);
    expect(large.status).toBe(413);
    expect(large.body.code).toBe('request_too_large');
  });

  it('keeps the exact fingerprints of requests without files (stored keys stay replays)', async () => {
    // Arrange: fingerprints of the code before files were covered, pinned
    const before = server.fingerprints.length;
    // Act
    await post('/none', 'k-none', [
      ['note', 'pay'],
      ['amount', '100'],
    ]);
    // `array()` sets `req.files` to [] when no file came
    await post('/no-file', 'k-no-file', [['note', 'pay']]);
    const json = await fetch(`${server.url}/json`, {
      method: 'POST',
      headers: { 'idempotency-key': 'k-json', 'content-type': 'application/json' },
      body: JSON.stringify({ amount: 100, currency: 'EUR' }),
    });
    // Assert
    expect(json.status).toBe(201);
    expect(server.fingerprints.slice(before)).toEqual([PINNED_NONE, PINNED_NO_FILE, PINNED_JSON]);
  });
});

const PINNED_NONE = '34e000208a82524bc7baade4961ea8ef614e0a5bc87083358c4b70af62b293a2';
const PINNED_NO_FILE = 'd91980bdf9c7742e71b4b31fd218aab8b21205978f8a949db92352eaaf113b5d';
const PINNED_JSON = 'd19baf2c7bfb254c2003652ec0a3c70c8bb14bf46335dd3e69106f0e61881480';
