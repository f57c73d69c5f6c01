/**
 * The fetch adapter handed a `Request` whose body was already read (a wrapper around it awaited
 * `request.json()`) or is locked (a reader holds its stream): `withIdempotency` threw undici's bare
 * "unusable" TypeError and `transactionalHandler` "ReadableStream is locked". Now both refuse it with an
 * `InvalidOptionsError` that says what to change, before anything is claimed or run: the same key with
 * the body unread is then a first request, never a replay. Served on a real server, through real fetch.
 */
import Database from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import { InvalidOptionsError } from '../../../src/core/errors.js';
import { transactionalHandler, withIdempotency } from '../../../src/fetch/index.js';
import { memoryStore } from '../../../src/index.js';
import { sqliteTransactional } from '../../../src/sqlite/index.js';
import { listenFetchForTest } from '../../helpers/listen-fetch.js';

type Wrapped = (request: Request) => Promise<Response>;

interface Served {
  url: string;
  runs(): number;
  /** The errors the wrapped handler threw, in order. */
  errors: unknown[];
}

// A server whose outer handler reads (or locks) the body first when the request says `x-read-first`.
async function serve(make: (count: () => void) => Wrapped): Promise<Served> {
  let runs = 0;
  const errors: unknown[] = [];
  const wrapped = make(() => runs++);
  const url = await listenFetchForTest(async (request) => {
    const readFirst = request.headers.get('x-read-first');
    if (readFirst === 'text') await request.text();
    if (readFirst === 'lock') request.body?.getReader();
    try {
      return await wrapped(request);
    } catch (error) {
      errors.push(error);
      return new Response('refused', { status: 500 });
    }
  });
  return { url: `${url}/orders`, runs: () => runs, errors };
}

const post = (url: string, readFirst?: 'text' | 'lock') =>
  fetch(url, {
    method: 'POST',
    headers: {
      'idempotency-key': 'k-used-body',
      'content-type': 'application/json',
      ...(readFirst === undefined ? {} : { 'x-read-first': readFirst }),
    },
    body: '{"amount":4200}',
  });

const servers: Array<[string, (count: () => void) => Wrapped]> = [
  [
    'withIdempotency',
    (count) =>
      withIdempotency(
        async (request) => {
          count();
          return Response.json(await request.json(), { status: 201 });
        },
        { store: memoryStore(), key: 'required' },
      ),
  ],
  [
    'transactionalHandler',
    (count) => {
      const database = new Database(':memory:');
      onTestFinished(() => {
        database.close();
      });
      return transactionalHandler(
        sqliteTransactional({ database }),
        (_request, _tx, body: { amount: number }) => {
          count();
          return { status: 201, body };
        },
      );
    },
  ],
];

describe.each(servers)('%s given a Request whose body was read', (wrapper, make) => {
  it.each(['text', 'lock'] as const)(
    'body %s: refused with what to change, nothing claimed',
    async (readFirst) => {
      const { url, runs, errors } = await serve(make);
      // Act
      const refused = await post(url, readFirst);
      const unread = await post(url);
      const retry = await post(url);
      // Assert
      expect(refused.status).toBe(500);
      expect(errors).toHaveLength(1);
      expect(errors[0]).toBeInstanceOf(InvalidOptionsError);
      expect((errors[0] as Error).message).toContain(`read (or locked) before ${wrapper}`);
      expect(unread.status).toBe(201);
      expect(unread.headers.get('idempotent-replayed')).toBeNull();
      expect(await unread.json()).toEqual({ amount: 4200 });
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(runs()).toBe(1);
    },
  );
});
