/**
 * An error that comes after the handler answered (a response serializer that throws, a `preSerialization`
 * hook, an `onSend` hook registered before the plugin) is not the handler failing: its effect (the charge)
 * happened, only its response was lost. Such a key keeps a `response_not_captured` marker, so every retry
 * is answered 409 and never runs the handler again. Before, Fastify's 500 for it released the key like a
 * thrown error, and the retry charged a second time. A handler that throws (an `Error` or any other value,
 * synchronously or not) still releases its key, as does a 5xx answer that fails to serialize: the key is
 * judged by the answer the handler gave. On a SQLite file.
 */

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import fastify, { type FastifyInstance } from 'fastify';
import { afterAll, afterEach, expect, it } from 'vitest';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { createIdempotency } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-fastify-error-after-answer-'));
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

let charges = 0;

/**
 * An app with the plugin on the SQLite store (`before` adds hooks ahead of it, `routes` its routes), and a
 * function that POSTs to one of its paths, with the same new key each time for that path.
 */
async function start(
  routes: (app: FastifyInstance) => void,
  before: (app: FastifyInstance) => void = () => {},
): Promise<(path: string) => Promise<Response>> {
  charges = 0;
  app = fastify();
  before(app);
  await app.register(idempotencyPlugin, { engine });
  routes(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const key = randomUUID();
  // One key per path: each path's retries share it.
  return (path) =>
    fetch(`${base}${path}`, { method: 'POST', headers: { 'idempotency-key': `${key}${path}` } });
}

/** The retries of a key whose first response was lost: 409 `response_not_captured`, no second charge. */
async function expectNeverRunAgain(post: () => Promise<Response>): Promise<void> {
  let retry = await post();
  // A marker kept once the response finished (`onResponse`): a retry that raced it saw the claim.
  for (let i = 0; i < 50 && retry.status === 409; i++) {
    if (((await retry.clone().json()) as { code: string }).code !== 'in_progress') break;
    await new Promise((done) => setTimeout(done, 10));
    retry = await post();
  }
  expect(retry.status).toBe(409);
  expect(((await retry.json()) as { code: string }).code).toBe('response_not_captured');
  const again = await post();
  expect(((await again.json()) as { code: string }).code).toBe('response_not_captured');
  expect(charges).toBe(1);
}

it('keeps the key when a response schema cannot serialize what the handler sent', async () => {
  const post = await start((app) => {
    const schema = {
      response: {
        201: {
          type: 'object',
          required: ['id'],
          properties: { id: { type: 'string' } },
        },
      },
    };
    app.post('/charges', { schema }, async (_request, reply) => {
      charges++;
      return reply.code(201).send({ charged: true }); // no `id`: the serializer throws
    });
  });
  const first = await post('/charges');
  expect(first.status).toBe(500);
  await expectNeverRunAgain(() => post('/charges'));
});

it('keeps the key when JSON.stringify throws on what the handler returned (a BigInt)', async () => {
  const post = await start((app) => {
    app.post('/charges', async () => {
      charges++;
      return { amount: 4200n };
    });
  });
  expect((await post('/charges')).status).toBe(500);
  await expectNeverRunAgain(() => post('/charges'));
});

it('keeps the key when a preSerialization hook throws on the handler’s answer', async () => {
  const post = await start((app) => {
    app.addHook('preSerialization', async (request) => {
      if (request.url === '/charges') throw new Error('envelope service down');
    });
    app.post('/charges', async (_request, reply) => {
      charges++;
      return reply.code(201).send({ charged: true });
    });
  });
  expect((await post('/charges')).status).toBe(500);
  await expectNeverRunAgain(() => post('/charges'));
});

it('keeps the key when an onSend hook registered before the plugin throws on the handler’s answer', async () => {
  const post = await start(
    (app) => {
      app.post('/charges', async (_request, reply) => {
        charges++;
        return reply.code(201).send({ charged: true });
      });
    },
    (app) => {
      // Signs each answer of the handler; the error reply Fastify makes of its failure passes.
      app.addHook('onSend', async (_request, reply, payload) => {
        if (reply.statusCode === 201) throw new Error('signing service down');
        return payload;
      });
    },
  );
  expect((await post('/charges')).status).toBe(500);
  await expectNeverRunAgain(() => post('/charges'));
});

it('keeps the key when an onSend hook before the plugin throws on every reply, the error reply too', async () => {
  let signingDown = true;
  const post = await start(
    (app) => {
      app.post('/charges', async (_request, reply) => {
        charges++;
        return reply.code(201).send({ charged: true });
      });
    },
    (app) => {
      app.addHook('onSend', async (_request, _reply, payload) => {
        if (signingDown) throw new Error('signing service down');
        return payload;
      });
    },
  );
  // Fastify's last-resort reply, written past every onSend hook: the capture never sees it.
  expect((await post('/charges')).status).toBe(500);
  signingDown = false; // back for the retries, whose answers pass the hook
  await expectNeverRunAgain(() => post('/charges'));
});

it('still releases the key of a handler that throws, whatever it throws, so the retry runs', async () => {
  const post = await start((app) => {
    app.post('/async-error', async () => {
      charges++;
      if (charges === 1) throw new Error('card network down');
      return { charged: charges };
    });
    app.post('/async-value', async () => {
      charges++;
      if (charges === 1) throw { statusCode: 503, message: 'card network down' };
      return { charged: charges };
    });
    app.post('/sync-value', (_request, reply) => {
      charges++;
      if (charges === 1) throw { statusCode: 500, message: 'card network down' };
      reply.send({ charged: charges });
    });
    app.post('/sent-error', (_request, reply) => {
      charges++;
      if (charges === 1) reply.send(new Error('card network down'));
      else reply.send({ charged: charges });
    });
    // A 5xx answer releases the key: so does one that then fails to serialize.
    app.post('/failed-5xx-answer', async (_request, reply) => {
      charges++;
      if (charges === 1) return reply.code(502).send({ error: 'card network down', code: 7n });
      return { charged: charges };
    });
  });
  for (const path of [
    '/async-error',
    '/async-value',
    '/sync-value',
    '/sent-error',
    '/failed-5xx-answer',
  ]) {
    charges = 0;
    const first = await post(path);
    expect(first.status, path).toBeGreaterThanOrEqual(500);
    const retry = await post(path);
    expect([retry.status, await retry.json()], path).toEqual([200, { charged: 2 }]);
  }
});

it('answers and replays handlers that return the reply, sent at once or later', async () => {
  const post = await start((app) => {
    app.post('/sent', (_request, reply) => {
      charges++;
      return reply.code(201).send({ charged: true });
    });
    app.post('/sent-later', (_request, reply) => {
      charges++;
      setTimeout(() => reply.code(201).send({ charged: true }), 10);
      return reply;
    });
  });
  for (const path of ['/sent', '/sent-later']) {
    const first = await post(path);
    expect([first.status, await first.json()], path).toEqual([201, { charged: true }]);
    const replay = await post(path);
    expect(replay.headers.get('idempotent-replayed'), path).toBe('true');
  }
  expect(charges).toBe(2);
});
