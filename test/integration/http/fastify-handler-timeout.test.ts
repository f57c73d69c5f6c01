/**
 * Fastify's `handlerTimeout` answers 503 while the handler still runs (it only aborts `request.signal`).
 * That 503 is Fastify's, not the handler's outcome: the key is not released, so a retry is answered 409
 * `response_not_captured` instead of running the charge a second time beside the first, also once the
 * engine's `maxExecution` and the lease have passed (left in progress, the key was then taken over).
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import fastify, { type FastifyInstance } from 'fastify';
import { afterEach, expect, it } from 'vitest';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

it('keeps the key of a handler Fastify timed out: the retry gets 409, never a second charge', async () => {
  let started = 0;
  let charged = 0;
  app = fastify();
  await app.register(idempotencyPlugin, {
    engine: createIdempotency({ store: memoryStore(), leaseMs: 300, maxExecution: '1s' }),
  });
  app.post('/charges', { handlerTimeout: 50 }, async (_request, reply) => {
    started++;
    if (started === 1) await sleep(300); // the first run outlasts the timeout, and still charges
    charged++;
    return reply.code(201).send({ charged });
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/charges`;
  const key = randomUUID();
  const post = () => fetch(url, { method: 'POST', headers: { 'idempotency-key': key } });

  const first = await post();
  expect(first.status).toBe(503); // FST_ERR_HANDLER_TIMEOUT, the handler still running
  const retry = await post();
  // Before, the 503 released the key: the retry ran the handler beside the first, a second charge.
  expect(retry.status).toBe(409);
  expect(((await retry.json()) as { code: string }).code).toBe('response_not_captured');
  // Past maxExecution (1 s) and the lease (300 ms): still never run again.
  await sleep(1500);
  const later = await post();
  expect(later.status).toBe(409);
  expect(((await later.json()) as { code: string }).code).toBe('response_not_captured');
  expect(charged).toBe(1);
  expect(started).toBe(1);
});
