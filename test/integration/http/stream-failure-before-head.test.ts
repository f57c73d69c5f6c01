/**
 * A body stream that fails before its head went out (a file that is missing, `ENOENT` before the first
 * chunk): the framework answers the error in the handler's place, and the client never sees the handler's
 * status. The key is released, as for a thrown error, on Fastify as on Express; a marker kept for it
 * answered every retry 409 for a 201 the client never got. But a web `Response`'s head goes out before its
 * first chunk (`@hono/node-server` flushes it when none is ready): a stream that fails then has shown the
 * client the 201, and the key keeps its marker. Over real sockets.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import express from 'express';
import Fastify from 'fastify';
import { expect, it, onTestFinished } from 'vitest';
import { idempotency as expressIdempotency } from '../../../src/express/index.js';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { withIdempotency } from '../../../src/fetch/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenExpress } from '../../helpers/listen-express.js';
import { listenFetch } from '../../helpers/listen-fetch.js';

// A stream that fails before its first chunk (the second run's stream ends with one row).
const failingAtOnce = () =>
  new Readable({
    read() {
      setImmediate(() => this.destroy(new Error('ENOENT: no such file')));
    },
  });
const oneRow = () => Readable.from(['id,amount\n1,4200\n']);

const post = (url: string, key: string) =>
  fetch(url, { method: 'POST', headers: { 'idempotency-key': key } }).then(
    async (response) => ({ status: response.status, body: await response.text() }),
    () => undefined,
  );

it('Fastify: the error reply goes out in place of the 201, and the key is released', async () => {
  let runs = 0;
  const app = Fastify();
  await app.register(idempotencyPlugin, { store: memoryStore() });
  app.post('/export', async (_request, reply) => {
    runs++;
    reply.code(201).type('text/csv');
    return reply.send(runs === 1 ? failingAtOnce() : oneRow());
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  onTestFinished(() => app.close());
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/export`;
  const key = randomUUID();
  const first = await post(url, key);
  expect(first?.status).toBe(500);
  const retry = await post(url, key);
  expect(retry).toEqual({ status: 201, body: 'id,amount\n1,4200\n' });
  expect(runs).toBe(2);
});

it('Express: a response destroyed before its head releases the key (the same rule)', async () => {
  let runs = 0;
  const app = express();
  app.use(expressIdempotency({ store: memoryStore() }));
  app.post('/export', (_req, res) => {
    runs++;
    res.status(201).type('text/csv');
    pipeline(runs === 1 ? failingAtOnce() : oneRow(), res).catch(() => {});
  });
  const url = `${await listenExpress(app)}/export`;
  const key = randomUUID();
  await post(url, key);
  let retry = await post(url, key);
  for (let i = 0; i < 20 && retry?.status !== 201; i++) {
    await sleep(10);
    retry = await post(url, key);
  }
  expect(retry).toEqual({ status: 201, body: 'id,amount\n1,4200\n' });
  expect(runs).toBe(2);
});

it('fetch on @hono/node-server: the 201 head went out before the first chunk, so the key keeps its marker', async () => {
  let runs = 0;
  const handler = withIdempotency(
    async () => {
      runs++;
      let pulls = 0;
      // Waits for its first chunk (a cursor, an upstream call), then fails: nothing is at hand at once.
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          await sleep(30);
          if (pulls++ === 0) controller.error(new Error('cursor lost'));
        },
      });
      return new Response(body, { status: 201, headers: { 'content-type': 'text/csv' } });
    },
    { store: memoryStore() },
  );
  const server = await listenFetch(handler, '/export');
  onTestFinished(() => server.close());
  const key = randomUUID();
  const first = await fetch(server.url, { method: 'POST', headers: { 'idempotency-key': key } });
  expect(first.status).toBe(201); // the head the client saw
  await first.text().catch(() => undefined);
  let retry = await post(server.url, key);
  for (let i = 0; i < 20 && retry?.body.includes('in_progress'); i++) {
    await sleep(10);
    retry = await post(server.url, key);
  }
  expect(retry?.status).toBe(409);
  expect(JSON.parse(retry?.body ?? '{}').code).toBe('response_not_captured');
  expect(runs).toBe(1);
});
