/**
 * `onSend` hooks registered before the plugin run before its capture, on the handler's answer and on the
 * layer's own (replays, problems). An async one delays the capture: a reply that a preHandler after the
 * claim sent without `return reply` (rate limiting, as `@fastify/rate-limit` with `hook: 'preHandler'`
 * adds it) was then still on its way when Fastify went on to the handler, which charged, and the hook's
 * 429 was stored as the handler's answer: every retry was replayed the 429 and the charge was never
 * reported. The handler is now not run, and the key is released. On a SQLite file.
 */

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { afterAll, afterEach, expect, it } from 'vitest';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { createIdempotency } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-fastify-onsend-before-'));
const database = new Database(join(dir, 'records.db'));
const engine = createIdempotency({ store: sqliteStore({ database }) });

afterAll(() => {
  database.close();
  rmSync(dir, { recursive: true, force: true });
});

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

it('never runs the handler after a late preHandler’s reply that an async onSend before the plugin delays', async () => {
  let charges = 0;
  app = fastify();
  // An async onSend hook ahead of the plugin (one that signs or logs answers, awaiting some I/O).
  app.addHook('onSend', async (_request, _reply, payload) => {
    await sleep(20);
    return payload;
  });
  await app.register(idempotencyPlugin, { engine });
  // A rate limiter that adds its preHandler to each route in its own onRoute hook, after the claim, and
  // sends its 429 without `return reply` (a style Fastify's docs allow).
  await app.register(
    fp(async (instance) => {
      instance.addHook('onRoute', (route) => {
        const limit = async (request: FastifyRequest, reply: FastifyReply) => {
          if (request.headers['x-over-limit'] === 'yes') {
            reply.code(429).send({ error: 'too many requests' });
          }
        };
        route.preHandler = [route.preHandler ?? [], limit].flat();
      });
    }),
  );
  app.post('/charges', async (_request, reply) => {
    charges++;
    return reply.code(201).send({ charged: charges });
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/charges`;
  const key = randomUUID();
  const post = (headers: Record<string, string> = {}) =>
    fetch(url, { method: 'POST', headers: { 'idempotency-key': key, ...headers } });

  const limited = await post({ 'x-over-limit': 'yes' });
  expect(limited.status).toBe(429);
  await sleep(50); // what Fastify would go on to run after the 429 has run by now
  expect(charges).toBe(0);
  // Before: the handler had charged behind the 429, which was stored and replayed here.
  const accepted = await post();
  expect([accepted.status, await accepted.json()]).toEqual([201, { charged: 1 }]);
  expect(accepted.headers.get('idempotent-replayed')).toBeNull();
  const replay = await post();
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
  expect(charges).toBe(1);
});
