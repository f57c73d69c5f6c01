/**
 * Uploads: a client that sends the same `FormData` again picks a new random boundary, so the retry's bytes
 * differ from the first request's. On every adapter, with the multipart body reaching the layer as bytes
 * (fetch and Hono always; Express through `express.raw`, Fastify through a buffer content-type parser), the
 * retry is a replay, and a changed form under the same key is a 422.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import express from 'express';
import express4 from 'express4';
import fastify from 'fastify';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotency as expressIdempotency } from '../../../src/express/index.js';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { withIdempotency } from '../../../src/fetch/index.js';
import { idempotency as honoIdempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenFetch } from '../../helpers/listen-fetch.js';

interface UploadServer {
  url: string;
  /** How many times the handler ran, by the upload's `tag` field. */
  executions: Map<string, number>;
  close(): Promise<void>;
}

function counter() {
  const executions = new Map<string, number>();
  const count = (tag: string) => {
    const n = (executions.get(tag) ?? 0) + 1;
    executions.set(tag, n);
    return n;
  };
  return { executions, count };
}

// The tag, read from the raw body: each framework hands the handler bytes here, not a parsed form.
const tagOf = (body: Uint8Array) =>
  /name="tag"\r\n\r\n([^\r]*)/.exec(Buffer.from(body).toString('latin1'))?.[1] ?? '';

async function startExpress(framework: typeof express): Promise<UploadServer> {
  const { executions, count } = counter();
  const app = framework();
  app.use(framework.raw({ type: 'multipart/form-data' }));
  app.use(expressIdempotency({ store: memoryStore(), key: 'required' }));
  app.post('/uploads', (req, res) => {
    const tag = tagOf(req.body as Buffer);
    res.status(201).json({ tag, n: count(tag), id: randomUUID() });
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/uploads`,
    executions,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function startFastify(): Promise<UploadServer> {
  const { executions, count } = counter();
  const app = fastify();
  app.addContentTypeParser('multipart/form-data', { parseAs: 'buffer' }, (_req, body, done) =>
    done(null, body),
  );
  await app.register(idempotencyPlugin, { store: memoryStore(), key: 'required' });
  app.post('/uploads', async (request, reply) => {
    const tag = tagOf(request.body as Buffer);
    reply.code(201);
    return { tag, n: count(tag), id: randomUUID() };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/uploads`,
    executions,
    close: () => app.close(),
  };
}

async function startFetch(): Promise<UploadServer> {
  const { executions, count } = counter();
  const handler = withIdempotency(
    async (request: Request) => {
      const form = await request.formData();
      const tag = String(form.get('tag'));
      return Response.json({ tag, n: count(tag), id: randomUUID() }, { status: 201 });
    },
    { store: memoryStore(), key: 'required' },
  );
  return { ...(await listenFetch(handler, '/uploads')), executions };
}

async function startHono(): Promise<UploadServer> {
  const { executions, count } = counter();
  const app = new Hono();
  app.use('/uploads', honoIdempotency({ store: memoryStore(), key: 'required' }));
  app.post('/uploads', async (c) => {
    const form = await c.req.formData();
    const tag = String(form.get('tag'));
    return c.json({ tag, n: count(tag), id: randomUUID() }, 201);
  });
  return { ...(await listenFetch(app.fetch, '/uploads')), executions };
}

describe.each([
  ['express (express.raw)', () => startExpress(express)],
  ['express 4 (express.raw)', () => startExpress(express4)],
  ['fastify (buffer parser)', startFastify],
  ['fetch', startFetch],
  ['hono', startHono],
])('multipart retries on %s', (_name, start) => {
  let server: UploadServer;
  beforeAll(async () => {
    server = await start();
  });
  afterAll(async () => {
    await server?.close();
  });

  const upload = (key: string, tag: string, file: string) => {
    const form = new FormData();
    form.append('tag', tag);
    form.append('evidence', new Blob([file], { type: 'application/pdf' }), 'receipt.pdf');
    // fetch serialises the form with a new random boundary on each call.
    return fetch(server.url, { method: 'POST', headers: { 'idempotency-key': key }, body: form });
  };

  it('replays a retried upload (new boundary), runs it once, and answers 422 to another file', async () => {
    // Arrange
    const key = randomUUID();
    const tag = randomUUID();
    // Act
    const first = await upload(key, tag, '%PDF-1.7 receipt');
    const retry = await upload(key, tag, '%PDF-1.7 receipt');
    const other = await upload(key, tag, '%PDF-1.7 another receipt');
    // Assert
    expect(first.status).toBe(201);
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toEqual(await first.json());
    expect(other.status).toBe(422);
    expect(server.executions.get(tag)).toBe(1);
  });
});
