/**
 * A streamed answer under an Idempotency-Key (Hono on `@hono/node-server`, the memory store): a route that
 * generates its answer token by token (as an LLM completion does) and sends it as Server-Sent Events with
 * `streamSSE`. The client sees each event as it is written, not once the stream has ended; a retry made
 * the moment it ends gets the same bytes as a replay; a client that leaves mid-stream does not stop the
 * generation, and its retry gets the whole answer, generated (and paid for) once.
 *
 * Run: `npx tsx examples/hono-streaming.ts`.
 * @module
 */
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { idempotency } from '../src/hono/index.js';
import { memoryStore } from '../src/index.js';

const idem = idempotency({ store: memoryStore(), key: 'required', maxExecution: '2m' });

let generations = 0;
const app = new Hono();
app.post('/completions', idem, (c) => {
  generations++;
  return streamSSE(c, async (stream) => {
    // Written to its end whether or not the client is still there: the layer stores what it wrote.
    for (const token of ['Effectively', ' once', ',', ' streamed', '.']) {
      await stream.writeSSE({ event: 'token', data: token });
      await sleep(100);
    }
    await stream.writeSSE({ event: 'done', data: '[DONE]' });
  });
});

const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
await new Promise((resolve) => server.once('listening', resolve));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/completions`;
const started = Date.now();
const at = () => `${String(Date.now() - started).padStart(4)} ms`;

function complete(key: string, signal?: AbortSignal): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'Say it in five tokens.' }),
    ...(signal === undefined ? {} : { signal }),
  });
}

// 1. Each event as it comes, then a retry the moment the stream ends.
const first = await complete('completion-1');
const decoder = new TextDecoder();
let body = '';
for await (const chunk of first.body as ReadableStream<Uint8Array>) {
  const text = decoder.decode(chunk, { stream: true });
  body += text;
  console.log(`${at()} received ${JSON.stringify(text.split('\n')[1] ?? text)}`);
}
const replay = await complete('completion-1');
const replayed = await replay.text();
console.log(
  `retry at the end → ${replay.status} (replayed: ${replay.headers.get('idempotent-replayed')}, same bytes: ${replayed === body})`,
);

// 2. A client that leaves after the first event: the answer is still generated to its end and stored.
const leaving = new AbortController();
const cut = await complete('completion-2', leaving.signal);
await (cut.body as ReadableStream<Uint8Array>).getReader().read();
leaving.abort();
let retry = await complete('completion-2');
while (retry.status === 409) {
  await retry.arrayBuffer();
  await sleep(100);
  retry = await complete('completion-2');
}
const whole = await retry.text();
console.log(
  `retry after leaving → ${retry.status} (replayed: ${retry.headers.get('idempotent-replayed')}, events: ${whole.split('\n\n').filter(Boolean).length})`,
);
console.log(`generations: ${generations}`);
server.close();
