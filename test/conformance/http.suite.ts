/**
 * The HTTP conformance suite: one script run against every adapter (Express, Fastify, fetch, Hono) and
 * every store. Each check drives a real server on loopback with real HTTP requests.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERRORS_DOC_URL } from '../../src/core/errors.js';
import { createIdempotency } from '../../src/index.js';
import {
  countingStore,
  gate,
  type HttpAdapterHarness,
  type HttpStoreFactory,
  type RunningServer,
  rawRequest,
  type TestReply,
  type TestRequest,
  type TestRoute,
} from '../helpers/http-harness.js';

/**
 * How a test drives the `/live` event stream, whose handler writes as it goes: the first chunk, then it
 * waits until the test's client has *received* that chunk (`received`) before it writes the second, then
 * until the test lets it go on (`proceed`) before the third and the end (or, with `failFirst`, an error on
 * its first run). A layer that held the body until its end would never let the client see the first chunk:
 * the test fails on a timeout instead of hanging.
 */
interface LiveScript {
  chunks: Buffer[];
  received: ReturnType<typeof gate>;
  proceed: ReturnType<typeof gate>;
  failFirst: boolean;
  /** Opened when the handler's stream has ended (or failed). */
  finished: ReturnType<typeof gate>;
  /** Set by the handler: resolves once its client's connection has closed. */
  gone?: Promise<void>;
}

// Long enough for a loaded 2-core machine; the layer before streaming never sent the first chunk at all.
const FIRST_CHUNK_TIMEOUT_MS = 10_000;

/** `promise`, or a rejection with `message` after `ms`. */
function within<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

interface Sent {
  status: number;
  headers: Headers;
  bytes: Buffer;
  json(): unknown;
}

/** Define the suite for one adapter on one store. */
export function describeHttpSuite(
  harness: HttpAdapterHarness,
  storeFactory: HttpStoreFactory,
): void {
  describe(`HTTP conformance: ${harness.name} on ${storeFactory.name}`, () => {
    const executions = new Map<string, number>();
    const gates = new Map<string, ReturnType<typeof gate>>();
    let server: RunningServer;
    let store: Awaited<ReturnType<typeof countingStore>>;

    const count = (req: TestRequest): number => {
      const tag = req.header('x-tag') ?? '';
      const n = (executions.get(tag) ?? 0) + 1;
      executions.set(tag, n);
      return n;
    };
    const ran = (tag: string) => executions.get(tag) ?? 0;
    const scripts = new Map<string, LiveScript>();
    const gateFor = (tag: string) => {
      let g = gates.get(tag);
      if (g === undefined) {
        g = gate();
        gates.set(tag, g);
      }
      return g;
    };

    // The event stream of `/live`, as its test scripted it (see `LiveScript`).
    const liveReply = async (req: TestRequest, run: number): Promise<TestReply> => {
      const script = scripts.get(req.header('x-tag') ?? '');
      if (script === undefined) throw new Error('no script for this tag');
      script.gone = req.gone();
      return {
        status: 200,
        headers: { 'x-custom': `live-${run}` },
        body: {
          kind: 'live',
          contentType: 'text/event-stream',
          async *produce() {
            try {
              yield script.chunks[0]!;
              await script.received.promise;
              yield script.chunks[1]!;
              await script.proceed.promise;
              if (script.failFirst && run === 1) throw new Error('upstream broke mid-stream');
              yield script.chunks[2]!;
            } finally {
              script.finished.open();
            }
          },
        },
      };
    };

    const jsonHandler = async (req: TestRequest) => {
      const n = count(req);
      return {
        status: 201,
        headers: {
          location: `/orders/${n}`,
          'x-custom': `custom-${n}`,
          'x-secret': 'secret',
          'set-cookie': 'session=abc; HttpOnly',
        },
        body: {
          kind: 'json' as const,
          value: {
            n,
            caller: req.header('authorization') ?? null,
            echo: req.body ?? null,
            id: randomUUID(),
          },
        },
      };
    };
    const routes: TestRoute[] = [
      { method: 'POST', path: '/json', handle: jsonHandler },
      { method: 'PATCH', path: '/json', handle: jsonHandler },
      { method: 'GET', path: '/json', handle: jsonHandler },
      { method: 'PUT', path: '/json', handle: jsonHandler },
      { method: 'POST', path: '/required', options: { key: 'required' }, handle: jsonHandler },
      { method: 'POST', path: '/uuid-keys', options: { minKeyLength: 36 }, handle: jsonHandler },
      { method: 'POST', path: '/off', options: { key: 'off' }, handle: jsonHandler },
      {
        method: 'POST',
        path: '/session',
        options: { scopeCookies: ['sid'] },
        handle: jsonHandler,
      },
      {
        method: 'POST',
        path: '/api-key',
        options: { scopeHeaders: ['X-API-Key'] },
        handle: jsonHandler,
      },
      {
        method: 'POST',
        path: '/binary',
        handle: async (req) => {
          count(req);
          return {
            status: 200,
            body: {
              kind: 'bytes',
              value: randomBytes(64 * 1024),
              contentType: 'application/octet-stream',
            },
          };
        },
      },
      {
        method: 'POST',
        path: '/gzip',
        handle: async (req) => {
          count(req);
          return {
            status: 201,
            headers: { 'content-encoding': 'gzip' },
            body: {
              kind: 'bytes',
              value: gzipSync(JSON.stringify({ id: 'ch_1', amount: 4200 })),
              contentType: 'application/json',
            },
          };
        },
      },
      {
        method: 'POST',
        path: '/empty',
        handle: async (req) => {
          count(req);
          return { status: 204, body: { kind: 'empty' } };
        },
      },
      {
        method: 'POST',
        path: '/stream',
        handle: async (req) => {
          count(req);
          const chunks = [randomBytes(1000), randomBytes(1000), randomBytes(1000)];
          return {
            status: 200,
            body: { kind: 'stream', chunks, contentType: 'application/x-ndjson', delayMs: 5 },
          };
        },
      },
      { method: 'POST', path: '/live', handle: (req) => liveReply(req, count(req)) },
      {
        method: 'POST',
        path: '/live-big',
        options: { maxBodyBytes: 1024 },
        handle: (req) => liveReply(req, count(req)),
      },
      {
        method: 'POST',
        path: '/fail',
        handle: async (req) => {
          if (count(req) === 1) throw new Error('first attempt fails');
          return { status: 201, body: { kind: 'json', value: { ok: true } } };
        },
      },
      {
        method: 'POST',
        path: '/server-error',
        handle: async (req) => {
          const n = count(req);
          return n === 1
            ? { status: 503, body: { kind: 'json', value: { error: 'busy' } } }
            : { status: 201, body: { kind: 'json', value: { n } } };
        },
      },
      {
        method: 'POST',
        path: '/informational',
        handle: async (req) => {
          const n = count(req);
          // A handler bug: a final status in the 1xx range, which Node sends as an informational response.
          return { status: n === 1 ? 150 : 201, body: { kind: 'json', value: { n } } };
        },
      },
      {
        method: 'POST',
        path: '/client-error',
        handle: async (req) => ({ status: 404, body: { kind: 'json', value: { n: count(req) } } }),
      },
      {
        method: 'POST',
        path: '/slow',
        handle: async (req) => {
          const n = count(req);
          await gateFor(req.header('x-tag') ?? '').promise;
          return { status: 201, body: { kind: 'json', value: { n, id: randomUUID() } } };
        },
      },
      {
        method: 'POST',
        path: '/big',
        options: { maxBodyBytes: 1024 },
        handle: async (req) => {
          count(req);
          return {
            status: 200,
            body: {
              kind: 'bytes',
              value: randomBytes(4096),
              contentType: 'application/octet-stream',
            },
          };
        },
      },
      {
        method: 'POST',
        path: '/context',
        handle: async (req) => {
          count(req);
          const ctx = req.context;
          return {
            status: 201,
            body: {
              kind: 'json',
              value: {
                key: ctx?.key,
                downstream: ctx?.downstreamKey('charge'),
                attempt: ctx?.attempt,
              },
            },
          };
        },
      },
    ];

    beforeAll(async () => {
      store = countingStore(await storeFactory.create());
      const engine = createIdempotency({
        store,
        namespace: `http-${randomUUID()}`,
        leaseMs: '10s',
      });
      server = await harness.start({
        engine,
        defaults: { replayHeaders: ['x-custom'], asyncContext: true },
        routes,
      });
    });
    afterAll(async () => {
      for (const g of gates.values()) g.open();
      for (const script of scripts.values()) {
        script.received.open();
        script.proceed.open();
      }
      await server?.close();
      await store?.close?.();
      await storeFactory.cleanup?.();
    });

    async function send(
      path: string,
      options: {
        key?: string;
        tag: string;
        body?: unknown;
        method?: string;
        headers?: Record<string, string>;
      },
    ): Promise<Sent> {
      const headers: Record<string, string> = { 'x-tag': options.tag, ...options.headers };
      if (options.key !== undefined) headers['idempotency-key'] = options.key;
      const method = options.method ?? 'POST';
      const hasBody = method !== 'GET';
      if (hasBody) headers['content-type'] = 'application/json';
      const response = await fetch(`${server.url}${path}`, {
        method,
        headers,
        ...(hasBody
          ? { body: JSON.stringify(options.body ?? { amount: 1, currency: 'EUR' }) }
          : {}),
      });
      const bytes = Buffer.from(await response.arrayBuffer());
      return {
        status: response.status,
        headers: response.headers,
        bytes,
        json: () => JSON.parse(bytes.toString()),
      };
    }
    const fresh = () => ({ key: `k-${randomUUID()}`, tag: randomUUID() });

    function expectProblem(
      response: Sent | { status: number; headers: Headers },
      status: number,
      code: string,
    ) {
      expect(response.status).toBe(status);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      if ('json' in response) {
        const problem = response.json() as { type: string; status: number; code: string };
        expect(problem.type).toBe(`${ERRORS_DOC_URL}#${code}`);
        expect(problem.status).toBe(status);
      }
    }

    it('replays a JSON response byte for byte with the allow-listed headers, and marks only the replay', async () => {
      const { key, tag } = fresh();
      const first = await send('/json', { key, tag, body: { a: 1, b: { c: 2, d: 3 } } });
      // Same payload with another key order: the fingerprint is canonical.
      const second = await send('/json', { key, tag, body: { b: { d: 3, c: 2 }, a: 1 } });
      expect(first.status).toBe(201);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      expect(first.headers.get('set-cookie')).not.toBeNull();
      expect(second.status).toBe(201);
      expect(second.bytes.equals(first.bytes)).toBe(true);
      expect(second.headers.get('idempotent-replayed')).toBe('true');
      expect(second.headers.get('content-type')).toBe(first.headers.get('content-type'));
      expect(second.headers.get('location')).toBe('/orders/1');
      expect(second.headers.get('x-custom')).toBe('custom-1');
      expect(second.headers.get('x-secret')).toBeNull();
      expect(second.headers.get('set-cookie')).toBeNull();
      expect(ran(tag)).toBe(1);
    });

    it('replays a binary body byte-exact', async () => {
      const { key, tag } = fresh();
      const first = await send('/binary', { key, tag });
      const second = await send('/binary', { key, tag });
      expect(first.bytes.length).toBe(64 * 1024);
      expect(second.bytes.equals(first.bytes)).toBe(true);
      expect(second.headers.get('content-type')).toBe('application/octet-stream');
      expect(second.headers.get('idempotent-replayed')).toBe('true');
      expect(ran(tag)).toBe(1);
    });

    it('replays a body the handler encoded with its Content-Encoding (the stored bytes are the encoded ones)', async () => {
      const { key, tag } = fresh();
      // fetch decodes gzip: without the header, the replay's bytes would reach the test still compressed.
      const first = await send('/gzip', { key, tag });
      const second = await send('/gzip', { key, tag });
      expect(first.json()).toEqual({ id: 'ch_1', amount: 4200 });
      expect(second.status).toBe(201);
      expect(second.headers.get('content-encoding')).toBe('gzip');
      expect(second.headers.get('idempotent-replayed')).toBe('true');
      expect(second.bytes.equals(first.bytes)).toBe(true);
      expect(ran(tag)).toBe(1);
    });

    it('replays an empty 204', async () => {
      const { key, tag } = fresh();
      const first = await send('/empty', { key, tag });
      const second = await send('/empty', { key, tag });
      expect([first.status, second.status]).toEqual([204, 204]);
      expect(second.bytes.length).toBe(0);
      expect(second.headers.get('idempotent-replayed')).toBe('true');
      expect(ran(tag)).toBe(1);
    });

    it('replays a streamed body as the concatenation of its chunks', async () => {
      const { key, tag } = fresh();
      const first = await send('/stream', { key, tag });
      const second = await send('/stream', { key, tag });
      expect(first.bytes.length).toBe(3000);
      expect(second.bytes.equals(first.bytes)).toBe(true);
      expect(second.headers.get('content-type')).toBe('application/x-ndjson');
      expect(ran(tag)).toBe(1);
    });

    it('answers 422 key_mismatch on every retry with a different payload, path or query', async () => {
      const { key, tag } = fresh();
      await send('/json', { key, tag, body: { amount: 1 } });
      const retries = [
        await send('/json', { key, tag, body: { amount: 2 } }),
        await send('/json', { key, tag, body: { amount: 2 } }),
        await send('/json?x=1', { key, tag, body: { amount: 1 } }),
        await send('/json', { key, tag, body: { amount: 1 }, method: 'PATCH' }),
      ];
      for (const retry of retries) expectProblem(retry, 422, 'key_mismatch');
      expect(ran(tag)).toBe(1);
    });

    it('answers 400 invalid_key for malformed keys and never reaches the store', async () => {
      const tag = randomUUID();
      const claimsBefore = store.claims;
      const bad: Array<Array<[string, string]>> = [
        [['Idempotency-Key', '']],
        [['Idempotency-Key', '""']],
        [['Idempotency-Key', 'a'.repeat(256)]],
        [['Idempotency-Key', `"${'a'.repeat(256)}"`]],
        [['Idempotency-Key', '"a\tb"']],
        [['Idempotency-Key', 'a\x01b']],
        [['Idempotency-Key', 'cl\xc3\xa9']],
        [['Idempotency-Key', '"cl\xc3\xa9"']],
        [['Idempotency-Key', 'has space']],
        [['Idempotency-Key', '"a", "b"']],
        [
          ['Idempotency-Key', 'one'],
          ['Idempotency-Key', 'two'],
        ],
      ];
      for (const headers of bad) {
        const response = await rawRequest(
          server.url,
          'POST',
          '/json',
          [['X-Tag', tag], ...headers],
          '{}',
        );
        expect(response.status, JSON.stringify(headers)).toBe(400);
        // Node's HTTP parser refuses control characters itself (a plain 400); every other case is ours.
        if (!headers.some(([, v]) => v.includes('\x01'))) {
          expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
          expect(JSON.parse(response.body.toString()).type).toBe(`${ERRORS_DOC_URL}#invalid_key`);
        }
      }
      expect(ran(tag)).toBe(0);
      expect(store.claims).toBe(claimsBefore);
    });

    it('answers 400 invalid_key for a key under the route’s minKeyLength, and accepts one at it', async () => {
      const tag = randomUUID();
      const claimsBefore = store.claims;
      for (const key of ['1', `"${'k'.repeat(35)}"`]) {
        const response = await rawRequest(
          server.url,
          'POST',
          '/uuid-keys',
          [
            ['X-Tag', tag],
            ['Idempotency-Key', key],
          ],
          '{}',
        );
        expect(response.status, key).toBe(400);
        expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
        const problem = JSON.parse(response.body.toString());
        expect(problem.type).toBe(`${ERRORS_DOC_URL}#invalid_key`);
        expect(problem.detail).toMatch(/at least 36 characters/);
      }
      expect(ran(tag)).toBe(0);
      expect(store.claims).toBe(claimsBefore);
      const accepted = await send('/uuid-keys', { key: randomUUID(), tag });
      expect(accepted.status).toBe(201);
      expect(ran(tag)).toBe(1);
    });

    it('accepts a 255-character key, quoted or bare, as the same key', async () => {
      const tag = randomUUID();
      const key = 'k'.repeat(255);
      const first = await send('/json', {
        key,
        tag: tag,
        headers: { authorization: `Bearer ${tag}` },
      });
      const second = await send('/json', {
        key: `"${key}"`,
        tag,
        headers: { authorization: `Bearer ${tag}` },
      });
      expect(first.status).toBe(201);
      expect(second.headers.get('idempotent-replayed')).toBe('true');
      expect(ran(tag)).toBe(1);
    });

    it('answers 400 missing_key on a required route, and runs optional routes without a key every time', async () => {
      const tag = randomUUID();
      const missing = await send('/required', { tag });
      expectProblem(missing, 400, 'missing_key');
      expect(missing.headers.get('link')).toContain('rel="describedby"');
      expect(ran(tag)).toBe(0);
      const a = await send('/json', { tag });
      const b = await send('/json', { tag });
      expect([a.status, b.status]).toEqual([201, 201]);
      expect(b.headers.get('idempotent-replayed')).toBeNull();
      expect(ran(tag)).toBe(2);
    });

    it('ignores the key on GET, PUT and on routes where it is off', async () => {
      const { key, tag } = fresh();
      await send('/json', { key, tag, method: 'GET' });
      await send('/json', { key, tag, method: 'GET' });
      await send('/json', { key, tag, method: 'PUT' });
      await send('/off', { key, tag });
      await send('/off', { key, tag });
      expect(ran(tag)).toBe(5);
    });

    it('releases the key when the handler throws or answers 5xx, so the retry runs again', async () => {
      const thrown = fresh();
      const failed = await send('/fail', thrown);
      const retried = await send('/fail', thrown);
      expect(failed.status).toBe(500);
      expect(retried.status).toBe(201);
      expect(retried.headers.get('idempotent-replayed')).toBeNull();
      expect(ran(thrown.tag)).toBe(2);

      const answered = fresh();
      const busy = await send('/server-error', answered);
      const ok = await send('/server-error', answered);
      expect([busy.status, ok.status]).toEqual([503, 201]);
      expect(ran(answered.tag)).toBe(2);
      const replay = await send('/server-error', answered);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(ran(answered.tag)).toBe(2);
    });

    it('never stores a response produced before the handler ran (a body that fails to parse)', async () => {
      const { key, tag } = fresh();
      const broken = await rawRequest(
        server.url,
        'POST',
        '/json',
        [
          ['X-Tag', tag],
          ['Idempotency-Key', key],
        ],
        '{"amount": ',
      );
      const valid = await send('/json', { key, tag });
      expect(broken.status).toBeGreaterThanOrEqual(400);
      expect(valid.status).toBe(201);
      expect(valid.headers.get('idempotent-replayed')).toBeNull();
      expect(ran(tag)).toBe(1);
    });

    /**
     * POST like `send`, through Node's client, which reports an informational response (`information`)
     * instead of waiting for a final one that never comes: `{ informational }` then, else the final status.
     */
    function sendSeeing1xx(
      path: string,
      { key, tag }: { key: string; tag: string },
    ): Promise<{ informational: number } | { status: number; replayed: boolean }> {
      const body = JSON.stringify({ amount: 1, currency: 'EUR' });
      return new Promise((resolve, reject) => {
        const request = httpRequest(`${server.url}${path}`, {
          method: 'POST',
          headers: {
            'x-tag': tag,
            'idempotency-key': key,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            connection: 'close',
          },
        });
        request.once('information', (info) => {
          resolve({ informational: info.statusCode });
          request.destroy();
        });
        request.once('response', (response) => {
          response.resume();
          resolve({
            status: response.statusCode ?? 0,
            replayed: response.headers['idempotent-replayed'] === 'true',
          });
        });
        request.on('error', (error) => reject(error));
        request.end(body);
      });
    }

    it('never stores a final 1xx status (Node sends it as an informational response, no answer at all): the key is released and the retry runs again', async () => {
      const request = fresh();
      const first = await sendSeeing1xx('/informational', request);
      expect(first).toEqual({ informational: 150 });
      let retry = await sendSeeing1xx('/informational', request);
      for (let i = 0; i < 250 && 'status' in retry && retry.status === 409; i++) {
        await sleep(20);
        retry = await sendSeeing1xx('/informational', request);
      }
      // Stored, the retry was the replay of that 150: an informational response again, and no answer.
      expect(retry).toEqual({ status: 201, replayed: false });
      expect(ran(request.tag)).toBe(2);
    });

    it('stores and replays a 4xx produced by the handler', async () => {
      const { key, tag } = fresh();
      const first = await send('/client-error', { key, tag });
      const second = await send('/client-error', { key, tag });
      expect([first.status, second.status]).toEqual([404, 404]);
      expect(second.headers.get('idempotent-replayed')).toBe('true');
      expect(ran(tag)).toBe(1);
    });

    it('answers 409 in_progress with Retry-After while the first request runs, then replays', async () => {
      const { key, tag } = fresh();
      const first = send('/slow', { key, tag });
      while (ran(tag) === 0) await sleep(5);
      const conflict = await send('/slow', { key, tag });
      expectProblem(conflict, 409, 'in_progress');
      expect(Number(conflict.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Number(conflict.headers.get('retry-after'))).toBeLessThanOrEqual(10);
      gateFor(tag).open();
      const done = await first;
      const replay = await send('/slow', { key, tag });
      expect(done.status).toBe(201);
      expect(replay.bytes.equals(done.bytes)).toBe(true);
      expect(ran(tag)).toBe(1);
    });

    it('runs 50 concurrent duplicates exactly once', async () => {
      const { key, tag } = fresh();
      const requests = Array.from({ length: 50 }, () => send('/slow', { key, tag }));
      while (ran(tag) === 0) await sleep(5);
      await sleep(50);
      gateFor(tag).open();
      const responses = await Promise.all(requests);
      expect(ran(tag)).toBe(1);
      const statuses = responses.map((r) => r.status);
      expect(statuses.filter((s) => s === 201).length).toBeGreaterThanOrEqual(1);
      expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
    });

    it('never shows one caller the response of another caller using the same key', async () => {
      const { key, tag } = fresh();
      const alice = await send('/json', { key, tag, headers: { authorization: 'Bearer alice' } });
      const bob = await send('/json', { key, tag, headers: { authorization: 'Bearer bob' } });
      const aliceAgain = await send('/json', {
        key,
        tag,
        headers: { authorization: 'Bearer alice' },
      });
      expect((alice.json() as { caller: string }).caller).toBe('Bearer alice');
      expect((bob.json() as { caller: string }).caller).toBe('Bearer bob');
      expect(bob.headers.get('idempotent-replayed')).toBeNull();
      expect(aliceAgain.bytes.equals(alice.bytes)).toBe(true);
      expect(ran(tag)).toBe(2);
    });

    it('scopes by the headers scopeHeaders names: a caller with another API key is never replayed', async () => {
      const { key, tag } = fresh();
      const first = await send('/api-key', { key, tag, headers: { 'x-api-key': 'sk_alice' } });
      const retry = await send('/api-key', { key, tag, headers: { 'x-api-key': 'sk_alice' } });
      // Another API key, or none (the empty scope), with the same key and body: runs on its own.
      const other = await send('/api-key', { key, tag, headers: { 'x-api-key': 'sk_mallory' } });
      const none = await send('/api-key', { key, tag });
      expect(first.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(retry.bytes.equals(first.bytes)).toBe(true);
      for (const response of [other, none]) {
        expect(response.status).toBe(201);
        expect(response.headers.get('idempotent-replayed')).toBeNull();
      }
      expect(ran(tag)).toBe(3);
    });

    it('scopes by the session cookie alone with scopeCookies: other cookies may change between retries', async () => {
      const { key, tag } = fresh();
      const first = await send('/session', {
        key,
        tag,
        headers: { cookie: 'sid=alice; lb=node-1' },
      });
      // A load balancer's stickiness cookie changed, and an analytics cookie appeared: the same caller.
      const retry = await send('/session', {
        key,
        tag,
        headers: { cookie: '_ga=GA1.1; lb=node-2; sid=alice' },
      });
      // Another session with the same key: never the first caller's response.
      const other = await send('/session', { key, tag, headers: { cookie: 'sid=bob; lb=node-1' } });
      expect(first.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(retry.bytes.equals(first.bytes)).toBe(true);
      expect(other.status).toBe(201);
      expect(other.headers.get('idempotent-replayed')).toBeNull();
      expect(ran(tag)).toBe(2);
    });

    it('sends an oversize response once, keeps a marker, and answers retries with 409 response_too_large', async () => {
      const { key, tag } = fresh();
      const first = await send('/big', { key, tag });
      const retry = await send('/big', { key, tag });
      expect(first.status).toBe(200);
      expect(first.bytes.length).toBe(4096);
      expectProblem(retry, 409, 'response_too_large');
      expect(retry.headers.get('retry-after')).toBeNull();
      expect(ran(tag)).toBe(1);
    });

    it('gives the handler its key and a stable downstream key through currentIdempotency()', async () => {
      const { key, tag } = fresh();
      const first = await send('/context', { key, tag });
      const value = first.json() as { key: string; downstream: string; attempt: number };
      expect(value.key).toBe(key);
      expect(value.downstream).toMatch(/^ik_[0-9a-f]{40}$/);
      expect(value.attempt).toBe(1);
    });

    it('completes the record when the client disconnects mid-request', async () => {
      const { key, tag } = fresh();
      const controller = new AbortController();
      const aborted = fetch(`${server.url}/slow`, {
        method: 'POST',
        headers: { 'idempotency-key': key, 'x-tag': tag, 'content-type': 'application/json' },
        body: JSON.stringify({ amount: 1, currency: 'EUR' }),
        signal: controller.signal,
      }).catch(() => 'aborted');
      while (ran(tag) === 0) await sleep(5);
      controller.abort();
      expect(await aborted).toBe('aborted');
      await sleep(20);
      gateFor(tag).open();
      let replay = await send('/slow', { key, tag });
      for (let i = 0; i < 100 && replay.status === 409; i++) {
        await sleep(20);
        replay = await send('/slow', { key, tag });
      }
      expect(replay.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(ran(tag)).toBe(1);
    });

    // A reset (RST, not FIN) is how many clients and proxies give up: a client that went away, whose
    // handler still runs and whose response is stored for the retry.
    it('completes the record when the client resets its connection mid-request', async () => {
      const { key, tag } = fresh();
      const { hostname, port } = new URL(server.url);
      const body = JSON.stringify({ amount: 1, currency: 'EUR' });
      const socket = connect({ host: hostname, port: Number(port) });
      socket.on('error', () => {});
      socket.write(
        [
          'POST /slow HTTP/1.1',
          `Host: ${hostname}:${port}`,
          'Content-Type: application/json',
          `Content-Length: ${Buffer.byteLength(body)}`,
          `Idempotency-Key: ${key}`,
          `X-Tag: ${tag}`,
          '',
          body,
        ].join('\r\n'),
      );
      while (ran(tag) === 0) await sleep(5);
      socket.resetAndDestroy();
      await sleep(20);
      gateFor(tag).open();
      let replay = await send('/slow', { key, tag });
      for (let i = 0; i < 100 && replay.status === 409; i++) {
        await sleep(20);
        replay = await send('/slow', { key, tag });
      }
      expect(replay.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(ran(tag)).toBe(1);
    });

    // A script for `/live` with three SSE-like chunks (`size` random bytes each, in hex).
    const liveScript = (tag: string, options: { failFirst?: boolean; size?: number } = {}) => {
      const size = options.size ?? 40;
      const script: LiveScript = {
        chunks: [1, 2, 3].map((i) =>
          Buffer.from(`data: ${i} ${randomBytes(size).toString('hex')}\n\n`),
        ),
        received: gate(),
        proceed: gate(),
        failFirst: options.failFirst ?? false,
        finished: gate(),
      };
      scripts.set(tag, script);
      return script;
    };

    /**
     * Send the request to a live route and read its body until the first chunk has arrived (bounded: a
     * layer that holds the body never sends it), then tell the handler (`received`). `rest()` reads on
     * to the end and gives the whole body.
     */
    async function openLive(
      path: string,
      { key, tag }: { key: string; tag: string },
      script: LiveScript,
      signal?: AbortSignal,
    ) {
      const response = await within(
        fetch(`${server.url}${path}`, {
          method: 'POST',
          headers: { 'x-tag': tag, 'idempotency-key': key, 'content-type': 'application/json' },
          body: JSON.stringify({ amount: 1, currency: 'EUR' }),
          ...(signal === undefined ? {} : { signal }),
        }),
        FIRST_CHUNK_TIMEOUT_MS,
        `${harness.name}: no response head while the handler's stream waits for its client`,
      );
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      const got: Buffer[] = [];
      let bytes = 0;
      while (bytes < script.chunks[0]!.byteLength) {
        const next = await within(
          reader.read(),
          FIRST_CHUNK_TIMEOUT_MS,
          `${harness.name}: the client received nothing of the stream while its handler waited`,
        );
        if (next.done) throw new Error('the body ended before its first chunk');
        got.push(Buffer.from(next.value));
        bytes += next.value.byteLength;
      }
      script.received.open();
      return {
        response,
        first: Buffer.concat(got),
        async rest(): Promise<Buffer> {
          for (;;) {
            const next = await reader.read();
            if (next.done) return Buffer.concat(got);
            got.push(Buffer.from(next.value));
          }
        },
      };
    }

    // The retry of a request whose outcome is settled in the background (a client that went away, a
    // stream that failed): retried while it answers 409 in_progress.
    async function retryWhileInProgress(path: string, request: { key: string; tag: string }) {
      let retry = await send(path, request);
      for (let i = 0; i < 250 && retry.status === 409; i++) {
        if ((retry.json() as { code?: string }).code !== 'in_progress') break;
        await sleep(20);
        retry = await send(path, request);
      }
      return retry;
    }

    it('streams a body as the handler writes it (the client gets the first chunk before the second is written) and replays it byte for byte to a retry made the moment it ends', async () => {
      const request = fresh();
      const script = liveScript(request.tag);
      script.proceed.open();
      const first = await openLive('/live', request, script);
      expect(first.first.equals(script.chunks[0]!)).toBe(true);
      // No Content-Length is made up for a body whose length is unknown when its head goes out.
      expect(first.response.headers.get('content-length')).toBeNull();
      expect(first.response.headers.get('idempotent-replayed')).toBeNull();
      const body = await first.rest();
      // At once: the end went out only once the outcome was stored, so this is never a 409.
      const replay = await send('/live', request);
      expect(first.response.status).toBe(200);
      expect(body.equals(Buffer.concat(script.chunks))).toBe(true);
      expect(replay.status).toBe(200);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.bytes.equals(body)).toBe(true);
      // The stored head is the head that went out.
      expect(replay.headers.get('content-type')).toBe(first.response.headers.get('content-type'));
      expect(replay.headers.get('x-custom')).toBe(first.response.headers.get('x-custom'));
      expect(replay.headers.get('x-custom')).toBe('live-1');
      expect(ran(request.tag)).toBe(1);
    });

    it('answers 409 in_progress to a retry while the stream runs, and the replay once it has ended', async () => {
      const request = fresh();
      const script = liveScript(request.tag);
      const first = await openLive('/live', request, script);
      const conflict = await send('/live', request);
      expectProblem(conflict, 409, 'in_progress');
      script.proceed.open();
      const body = await first.rest();
      const replay = await send('/live', request);
      expect(replay.status).toBe(200);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.bytes.equals(body)).toBe(true);
      expect(ran(request.tag)).toBe(1);
    });

    it('stores the whole stream of a client that went away mid-stream: the handler runs to its end, and the retry gets all of it', async () => {
      const request = fresh();
      const script = liveScript(request.tag);
      const controller = new AbortController();
      const first = await openLive('/live', request, script, controller.signal);
      controller.abort();
      await first.rest().catch(() => undefined);
      // The stream goes on only once the server has seen the client go.
      await within(script.gone!, FIRST_CHUNK_TIMEOUT_MS, 'the server never saw the client go');
      script.proceed.open();
      await within(script.finished.promise, FIRST_CHUNK_TIMEOUT_MS, 'the handler was stopped');
      const replay = await retryWhileInProgress('/live', request);
      expect(replay.status).toBe(200);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.bytes.equals(Buffer.concat(script.chunks))).toBe(true);
      expect(ran(request.tag)).toBe(1);
    });

    it('streams a body over maxBodyBytes in full, and answers its retries 409 response_too_large', async () => {
      const request = fresh();
      // Three chunks of ~810 bytes: the route's 1024 is passed at the second, mid-stream.
      const script = liveScript(request.tag, { size: 400 });
      script.proceed.open();
      const first = await openLive('/live-big', request, script);
      const body = await first.rest();
      expect(body.equals(Buffer.concat(script.chunks))).toBe(true);
      const retry = await send('/live-big', request);
      expectProblem(retry, 409, 'response_too_large');
      expect(ran(request.tag)).toBe(1);
    });

    it('never runs again a stream that fails before its end: the response is cut, and every retry gets 409 response_not_captured (the handler answered 200, its work is done)', async () => {
      const request = fresh();
      const script = liveScript(request.tag, { failFirst: true });
      script.proceed.open();
      const first = await openLive('/live', request, script);
      await expect(first.rest()).rejects.toThrow();
      const retry = await retryWhileInProgress('/live', request);
      expectProblem(retry, 409, 'response_not_captured');
      expect((retry.json() as { detail?: string }).detail).toMatch(
        /status 200\) with a body stream that failed/,
      );
      const again = await send('/live', request);
      expectProblem(again, 409, 'response_not_captured');
      expect(ran(request.tag)).toBe(1);
    });
  });
}
