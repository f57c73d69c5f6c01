/**
 * A body stream that fails before anything of it went out (a file that is missing, `ENOENT` before the
 * first chunk): the framework answers the error in the handler's place, and the client never sees the
 * handler's status. The key is released, as for a thrown error, on Fastify as on Express; a marker kept
 * for it answered every retry 409 for a 201 the client never got. Over real sockets.
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
import { memoryStore } from '../../../src/index.js';
import { listenExpress } from '../../helpers/listen-express.js';

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
