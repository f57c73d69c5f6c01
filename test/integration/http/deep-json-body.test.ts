/**
 * A key reused with another JSON body nested some thousands of levels deep is refused (422), behind the
 * body parsers of Express and Fastify, which hand the layer a parsed value of any depth. Before the fix,
 * every such body fingerprinted as one constant and the second request was replayed the first's answer.
 */
import { randomUUID } from 'node:crypto';
import express from 'express';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenExpress } from '../../helpers/listen-express.js';

/** `[[[…leaf…]]]`, `depth` arrays deep, as JSON text. */
const nestedText = (depth: number, leaf: string) =>
  `${'['.repeat(depth)}${leaf}${']'.repeat(depth)}`;

/** Three POSTs with one key: a deep body, another deep body, the first again. */
async function reuseKey(url: string): Promise<Response[]> {
  const key = randomUUID();
  const post = (body: string) =>
    fetch(`${url}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body,
    });
  return [
    await post(nestedText(20_000, '1')),
    await post(nestedText(20_000, '2')),
    await post(nestedText(20_000, '1')),
  ];
}

function expectRefusedThenReplayed(responses: Response[], runs: number): void {
  const [first, other, retry] = responses as [Response, Response, Response];
  expect(first.status).toBe(201);
  expect(other.status).toBe(422);
  expect(retry.status).toBe(201);
  expect(retry.headers.get('idempotent-replayed')).toBe('true');
  expect(runs).toBe(1);
}

describe('a key reused with another deeply nested JSON body', () => {
  it('is 422 on Express behind express.json()', async () => {
    // Arrange
    let runs = 0;
    const app = express();
    app.use(express.json({ limit: '1mb' }), idempotency({ store: memoryStore() }));
    app.post('/orders', (_req, res) => {
      runs++;
      res.status(201).json({ run: runs });
    });
    const url = await listenExpress(app);
    // Act
    const responses = await reuseKey(url);
    // Assert
    expectRefusedThenReplayed(responses, runs);
  });

  it('is 422 on Fastify behind its JSON parser', async () => {
    // Arrange
    let runs = 0;
    const app = Fastify();
    await app.register(idempotencyPlugin, { store: memoryStore() });
    app.post('/orders', async (_request, reply) => {
      runs++;
      return reply.code(201).send({ run: runs });
    });
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      // Act
      const responses = await reuseKey(url);
      // Assert
      expectRefusedThenReplayed(responses, runs);
    } finally {
      await app.close();
    }
  });
});
