/**
 * A response body stream of strings whose chunks are all at hand when the layer looks (a `ReadableStream`
 * that enqueues text and closes at once): `@hono/node-server` and Fastify send the strings as UTF-8, and
 * the relay of a slower stream stored them so. Read whole, they were kept as they were and their sizes
 * were no numbers: one string was handed to the store as the body, could not be encoded, and the retry of
 * a request answered 201 (and charged) got `500 replayed_error`; two made joining them throw, the client's
 * response was cut and the key stayed in progress (409) until `maxExecution`. They are now stored as the
 * bytes that go out, and the retry gets the replay. Over real sockets, on the fetch adapter and Fastify.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { expect, it, onTestFinished } from 'vitest';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { withIdempotency } from '../../../src/fetch/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenFetch } from '../../helpers/listen-fetch.js';

// A body of strings, all enqueued before anything reads it.
const textStream = (text: string) =>
  new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(text as unknown as Uint8Array); // strings, as a handler may enqueue them
      controller.enqueue(' ✓' as unknown as Uint8Array);
      controller.close();
    },
  });

const post = (url: string, key: string) =>
  fetch(url, { method: 'POST', headers: { 'idempotency-key': key } }).then(async (response) => ({
    status: response.status,
    replayed: response.headers.get('idempotent-replayed'),
    body: await response.text(),
  }));

async function answersAndReplays(url: string, runs: () => number): Promise<void> {
  const key = randomUUID();
  const first = await post(url, key);
  expect(first).toEqual({ status: 201, replayed: null, body: 'charge 1 ✓' });
  const retry = await post(url, key);
  expect(retry).toEqual({ status: 201, replayed: 'true', body: 'charge 1 ✓' });
  expect(runs()).toBe(1);
}

it('fetch adapter: a stream of strings is stored as the bytes that went out, and replayed', async () => {
  let runs = 0;
  const handler = withIdempotency(
    () => {
      runs++;
      return new Response(textStream(`charge ${runs}`), {
        status: 201,
        headers: { 'content-type': 'text/plain; charset=utf-8' },
      });
    },
    { store: memoryStore() },
  );
  const server = await listenFetch(handler, '/charges');
  onTestFinished(() => server.close());
  await answersAndReplays(server.url, () => runs);
});

it('Fastify: a web stream of strings sent as the reply is stored as its bytes, and replayed', async () => {
  let runs = 0;
  const app = Fastify();
  await app.register(idempotencyPlugin, { store: memoryStore() });
  app.post('/charges', async (_request, reply) => {
    runs++;
    reply.code(201).type('text/plain; charset=utf-8');
    return reply.send(textStream(`charge ${runs}`));
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  onTestFinished(() => app.close());
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/charges`;
  await answersAndReplays(url, () => runs);
});
