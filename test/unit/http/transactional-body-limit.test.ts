/**
 * `transactionalHandler` reads the request body whole before its handler (parsed, out of the transaction):
 * it read any body, unbounded, so one request could hold gigabytes in memory. It takes `requestBodyLimit`
 * now, as `withIdempotency` does (default 1 MiB): a larger body gets `413 request_too_large`, announced by
 * its `Content-Length` (nothing read) or once a chunked body goes over, and no transaction starts; not
 * `false`, since the handler gets the body. The Express and Fastify transactional routes take the
 * middleware's option, `false` included (their bodies over it: `transactional-body-limit` in
 * test/integration/http/); it refused every value, so the limit they read bodies with could not be raised.
 */
import { describe, expect, it } from 'vitest';
import { transactionalRoute } from '../../../src/express/index.js';
import { transactionalRoute as fastifyRoute } from '../../../src/fastify/index.js';
import { transactionalHandler } from '../../../src/fetch/index.js';
import type { TransactionalClaim } from '../../../src/http/index.js';

// What the runner's transaction answers besides the handler's value: executed, committed.
const EXECUTED = { status: 'executed', token: 1, attempt: 1, failedOpen: false } as const;

/** A runner that commits whatever the handler returns, counting the transactions. */
function countingRunner() {
  const runner = {
    transactions: 0,
    async runInTransaction(_claim: TransactionalClaim, fn: (tx: undefined) => unknown) {
      runner.transactions++;
      return { ...EXECUTED, value: await fn(undefined) };
    },
  };
  return runner;
}

const headers = { 'content-type': 'application/json', 'idempotency-key': 'key-1' };

// A chunked body (no Content-Length): `size` bytes of a JSON string, in 1 KiB chunks.
function chunked(size: number): Request {
  const chunk = new TextEncoder().encode('x'.repeat(1024));
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent >= size) return controller.close();
      sent += chunk.byteLength;
      controller.enqueue(chunk);
    },
  });
  return new Request('http://localhost/payments', {
    method: 'POST',
    headers,
    body,
    duplex: 'half',
  } as RequestInit);
}

describe('transactionalHandler requestBodyLimit', () => {
  it('answers 413 to a body announced over the limit, without a transaction', async () => {
    const runner = countingRunner();
    const POST = transactionalHandler(runner, () => ({ status: 201 }), { requestBodyLimit: 10 });
    const response = await POST(
      new Request('http://localhost/payments', {
        method: 'POST',
        headers: { ...headers, 'content-length': '16' },
        body: '{"amount":12345}',
      }),
    );
    expect(response.status).toBe(413);
    expect(((await response.json()) as { type: string }).type).toMatch(/request_too_large$/);
    expect(runner.transactions).toBe(0);
  });

  it('answers 413 to a chunked body once it goes over, and keeps the default of 1 MiB', async () => {
    const runner = countingRunner();
    const small = transactionalHandler(runner, () => ({ status: 201 }), { requestBodyLimit: 4096 });
    expect((await small(chunked(64 * 1024))).status).toBe(413);
    const byDefault = transactionalHandler(runner, () => ({ status: 201 }));
    expect((await byDefault(chunked(2 * 1024 * 1024))).status).toBe(413);
    expect(runner.transactions).toBe(0);
  });

  it('hands a body within the limit to the handler, parsed', async () => {
    const runner = countingRunner();
    let seen: unknown;
    const POST = transactionalHandler(
      runner,
      (_request, _tx, body) => {
        seen = body;
        return { status: 201 };
      },
      { requestBodyLimit: 64 },
    );
    const response = await POST(
      new Request('http://localhost/payments', { method: 'POST', headers, body: '{"amount":1}' }),
    );
    expect(response.status).toBe(201);
    expect(seen).toEqual({ amount: 1 });
  });

  it('refuses a bad limit, and false', () => {
    const runner = countingRunner();
    for (const bad of [-1, '1mb', false]) {
      expect(() =>
        transactionalHandler(runner, () => ({ status: 201 }), { requestBodyLimit: bad as number }),
      ).toThrow(expect.objectContaining({ message: expect.stringMatching(/requestBodyLimit/) }));
    }
  });
});

describe('Express and Fastify transactionalRoute requestBodyLimit', () => {
  const runner = countingRunner();
  const answer = () => ({ status: 201 });
  const routes: Array<[string, (options: { requestBodyLimit?: number | false }) => unknown]> = [
    ['Express', (options) => transactionalRoute(runner, answer, options)],
    ['Fastify', (options) => fastifyRoute(runner, answer, options)],
  ];

  it.each(routes)('%s: takes the middleware values, false included', (_name, make) => {
    const limits: Array<number | false | undefined> = [0, 10, 20 * 1024 * 1024, false, undefined];
    for (const requestBodyLimit of limits) {
      expect(() => make({ requestBodyLimit })).not.toThrow();
    }
  });

  it.each(routes)('%s: refuses a bad limit at creation, naming it and the value', (_name, make) => {
    const bad: Array<[unknown, string]> = [
      [-1, '-1'],
      [1.5, '1.5'],
      ['1mb', '"1mb"'],
      [Number.POSITIVE_INFINITY, 'Infinity'],
      [true, 'true'],
      [null, 'null'],
    ];
    for (const [value, shown] of bad) {
      expect(() => make({ requestBodyLimit: value as number })).toThrow(
        expect.objectContaining({
          name: 'InvalidOptionsError',
          message: `requestBodyLimit: must be a non-negative integer or false, got ${shown}`,
        }),
      );
    }
  });
});
