/**
 * JSON bodies whose bytes are not UTF-8: `{"note":"\xff"}` and `{"note":"\xfe"}` (raw bytes). Every
 * adapter's parser reads both as `{"note":"\ufffd"}` (none refuses them), and so did the fingerprint, so a
 * key reused for the second body was replayed the first one's answer. Now, wherever the layer sees the
 * bytes (fetch and Hono always; Express with `express.json({ verify: keepRawBody })`; Fastify with
 * `keepJsonText: true`), the second request is 422 `key_mismatch`, the handler runs once, and a retry of
 * the same bytes is still a replay. The first request is answered as before: the handler's 201.
 */
import express from 'express';
import express4 from 'express4';
import fastify from 'fastify';
import { Hono } from 'hono';
import { validator } from 'hono/validator';
import { describe, expect, it, onTestFinished } from 'vitest';
import { idempotency as expressIdempotency, keepRawBody } from '../../../src/express/index.js';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { withIdempotency } from '../../../src/fetch/index.js';
import { idempotency as honoIdempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenExpress } from '../../helpers/listen-express.js';
import { type KeyedAnswer, postWithKey } from '../../helpers/post-with-key.js';

// `{"note":"<byte>"}` with the byte raw inside the string.
const noteBody = (byte: number): Buffer =>
  Buffer.concat([Buffer.from('{"note":"'), Buffer.from([byte]), Buffer.from('"}')]);

const codeUnits = (text: string) => [...text].map((c) => c.charCodeAt(0).toString(16));

type Answer = KeyedAnswer<{ note?: string[]; code?: string }>;

/** Sends one JSON body with the key `k`; what the adapter under test answered. */
type Send = (body: Buffer) => Promise<Answer>;

interface Server {
  send: Send;
  /** How many times the handler ran. */
  runs(): number;
}

const jsonHeaders = { 'content-type': 'application/json' };

async function startFetch(): Promise<Server> {
  let runs = 0;
  const handler = withIdempotency(
    async (request: Request) => {
      runs++;
      const { note } = (await request.json()) as { note: string };
      return Response.json({ note: codeUnits(note) }, { status: 201 });
    },
    { store: memoryStore(), key: 'required' },
  );
  const send: Send = async (body) => {
    const response = await handler(
      new Request('http://x/notes', {
        method: 'POST',
        headers: { 'idempotency-key': 'k', ...jsonHeaders },
        body,
      }),
    );
    return {
      status: response.status,
      replayed: response.headers.get('idempotent-replayed'),
      body: (await response.json()) as Answer['body'],
    };
  };
  return { send, runs: () => runs };
}

async function startExpress(framework: typeof express): Promise<Server> {
  let runs = 0;
  const app = framework();
  app.use(framework.json({ verify: keepRawBody }));
  app.use(expressIdempotency({ store: memoryStore(), key: 'required' }));
  app.post('/notes', (req, res) => {
    runs++;
    res.status(201).json({ note: codeUnits((req.body as { note: string }).note) });
  });
  const url = `${await listenExpress(app)}/notes`;
  return { send: (body) => postWithKey(url, 'k', body, jsonHeaders), runs: () => runs };
}

async function startFastify(): Promise<Server> {
  let runs = 0;
  const app = fastify();
  onTestFinished(() => app.close());
  await app.register(idempotencyPlugin, {
    store: memoryStore(),
    key: 'required',
    keepJsonText: true,
  });
  app.post('/notes', async (request, reply) => {
    runs++;
    reply.code(201);
    return { note: codeUnits((request.body as { note: string }).note) };
  });
  const send: Send = async (body) => {
    const response = await app.inject({
      method: 'POST',
      url: '/notes',
      headers: { 'idempotency-key': 'k', ...jsonHeaders },
      payload: body,
    });
    return {
      status: response.statusCode,
      replayed: (response.headers['idempotent-replayed'] as string | undefined) ?? null,
      body: response.json(),
    };
  };
  return { send, runs: () => runs };
}

async function startHono(): Promise<Server> {
  let runs = 0;
  const app = new Hono();
  app.use('/notes', honoIdempotency({ store: memoryStore(), key: 'required' }));
  app.post('/notes', async (c) => {
    runs++;
    const { note } = await c.req.json<{ note: string }>();
    return c.json({ note: codeUnits(note) }, 201);
  });
  const send: Send = async (body) => {
    const response = await app.request('/notes', {
      method: 'POST',
      headers: { 'idempotency-key': 'k', ...jsonHeaders },
      body,
    });
    return {
      status: response.status,
      replayed: response.headers.get('idempotent-replayed'),
      body: (await response.json()) as Answer['body'],
    };
  };
  return { send, runs: () => runs };
}

describe.each([
  ['fetch', startFetch],
  ['Express 5 (express.json({ verify: keepRawBody }))', () => startExpress(express)],
  [
    'Express 4 (express.json({ verify: keepRawBody }))',
    () => startExpress(express4 as unknown as typeof express),
  ],
  ['Fastify (keepJsonText: true)', startFastify],
  ['Hono', startHono],
])(
  '%s: a key reused for a JSON body that differs only in bytes that are not UTF-8',
  (_name, start) => {
    it('is 422 key_mismatch, the handler ran once, and the same bytes are still a replay', async () => {
      // Arrange
      const server = await start();
      // Act
      const first = await server.send(noteBody(0xff));
      const other = await server.send(noteBody(0xfe));
      const retry = await server.send(noteBody(0xff));
      // Assert: the parser read U+FFFD, and answered as it always did
      expect(first).toMatchObject({ status: 201, replayed: null, body: { note: ['fffd'] } });
      expect(other).toMatchObject({ status: 422, body: { code: 'key_mismatch' } });
      expect(retry).toMatchObject({ status: 201, replayed: 'true', body: { note: ['fffd'] } });
      expect(server.runs()).toBe(1);
    });

    it('tells the bytes apart from a U+FFFD the client wrote', async () => {
      // Arrange
      const server = await start();
      // Act
      const first = await server.send(noteBody(0xff));
      const written = await server.send(Buffer.from('{"note":"\ufffd"}', 'utf8'));
      // Assert
      expect(first.status).toBe(201);
      expect(written).toMatchObject({ status: 422, body: { code: 'key_mismatch' } });
      expect(server.runs()).toBe(1);
    });
  },
);

it('Hono: a JSON validator before the layer, behind a middleware that reads the bytes first, as docs/adapters/hono.md says', async () => {
  // Arrange: the validator's c.req.json() caches the decoded text, whose bytes the layer would read (U+FFFD
  // for both bodies); read first, the bytes are what Hono caches and converts the text from.
  let runs = 0;
  const app = new Hono();
  app.use('/notes', async (c, next) => {
    await c.req.arrayBuffer();
    await next();
  });
  app.post(
    '/notes',
    validator('json', (value) => value as { note: string }),
    honoIdempotency({ store: memoryStore(), key: 'required' }),
    (c) => {
      runs++;
      return c.json({ note: codeUnits(c.req.valid('json').note) }, 201);
    },
  );
  const send = (body: Buffer) =>
    app.request('/notes', {
      method: 'POST',
      headers: { 'idempotency-key': 'k', ...jsonHeaders },
      body,
    });
  // Act
  const first = await send(noteBody(0xff));
  const other = await send(noteBody(0xfe));
  // Assert
  expect(first.status).toBe(201);
  expect(await first.json()).toEqual({ note: ['fffd'] });
  expect(other.status).toBe(422);
  expect(runs).toBe(1);
});
