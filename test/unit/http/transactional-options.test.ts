/**
 * The transactional routes' options and scope, against a runner that records the claim and runs the
 * handler (no database): bad options fail at creation, as the middleware's do; a scope is never shared
 * across callers by accident; the answer's body is sent as the bytes it is.
 */
import { describe, expect, it } from 'vitest';
import { isInvalidOptionsError } from '../../../src/core/errors.js';
import { transactionalRoute } from '../../../src/express/index.js';
import { transactionalRoute as fastifyRoute } from '../../../src/fastify/index.js';
import {
  type TransactionalHandlerOptions,
  transactionalHandler,
} from '../../../src/fetch/index.js';
import type { TransactionalAnswer, TransactionalClaim } from '../../../src/http/index.js';

/** A runner that commits whatever the handler returns, and keeps the claims it was given. */
function recordingRunner() {
  const claims: TransactionalClaim[] = [];
  return {
    claims,
    async runInTransaction(claim: TransactionalClaim, fn: (tx: undefined) => unknown) {
      claims.push(claim);
      return {
        status: 'executed' as const,
        value: await fn(undefined),
        token: 1,
        attempt: 1,
        failedOpen: false,
      };
    },
  };
}

const post = (headers: Record<string, string> = {}, body = '{"amount":1}') =>
  new Request('http://localhost/payments', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': 'key-1', ...headers },
    body,
  });

function handler(
  options: TransactionalHandlerOptions,
  answer: TransactionalAnswer = { status: 201 },
) {
  const runner = recordingRunner();
  return { runner, POST: transactionalHandler(runner, () => answer, options) };
}

describe('transactional route options', () => {
  it.each([
    ['headerName', { headerName: 'bad header' }],
    ['minKeyLength', { minKeyLength: 0 }],
    ['minKeyLength', { minKeyLength: 256 }],
    ['replayHeaders', { replayHeaders: ['set-cookie'] }],
    ['fingerprintHeaders', { fingerprintHeaders: ['x y'] }],
    ['scopeCookies', { scopeCookies: [] }],
    ['retentionMs', { retentionMs: 'soon' }],
    ['storeServerErrors', { storeServerErrors: 'false' }],
    ['maxBodyBytes', { maxBodyBytes: -1 }],
    ['scope', { scope: 'tenant-a' }],
    // Middleware options that have no meaning here are refused, not silently ignored.
    ['failOpen', { failOpen: true }],
    ['key', { key: 'optional' }],
    // A misspelt option would otherwise change nothing, silently.
    ['storeServerError', { storeServerError: true }],
  ])('refuses a bad %s at creation, in every adapter', (name, options) => {
    // Arrange
    const runner = recordingRunner();
    const create = [
      () => transactionalRoute(runner, () => ({ status: 201 }), options as never),
      () => fastifyRoute(runner, () => ({ status: 201 }), options as never),
      () => transactionalHandler(runner, () => ({ status: 201 }), options as never),
    ];
    // Act / Assert
    for (const make of create) {
      expect(make).toThrow(expect.objectContaining({ name: 'InvalidOptionsError' }));
      try {
        make();
      } catch (error) {
        expect(isInvalidOptionsError(error) && error.message).toContain(name);
      }
    }
  });

  it('refuses a runner without runInTransaction and a handler that is not a function', () => {
    expect(() => transactionalHandler({} as never, () => ({ status: 201 }))).toThrow(
      /runInTransaction/,
    );
    expect(() => transactionalRoute(recordingRunner(), undefined as never)).toThrow(/handler/);
  });

  it('passes retentionMs to the transaction, in milliseconds', async () => {
    const { runner, POST } = handler({ retentionMs: '2m' });
    await POST(post());
    expect(runner.claims[0]?.retentionMs).toBe(120_000);
  });
});

describe('transactional route scope', () => {
  it('uses what an async scope resolves to', async () => {
    const { runner, POST } = handler({ scope: async () => 'tenant-a' });
    expect((await POST(post())).status).toBe(201);
    expect(runner.claims[0]?.scope).toBe('tenant-a');
  });

  it('digests the credentials when the scope gives undefined or null: two callers never share a scope', async () => {
    for (const scope of [() => undefined, async () => null, () => null]) {
      // Arrange
      const { runner, POST } = handler({ scope: scope as TransactionalHandlerOptions['scope'] });
      // Act
      await POST(post({ authorization: 'Bearer alice' }));
      await POST(post({ authorization: 'Bearer bob' }));
      // Assert
      const [alice, bob] = runner.claims.map((claim) => claim.scope);
      expect(alice).not.toBe('');
      expect(alice).not.toBe(bob);
    }
  });

  it('refuses a scope that is not a string, before anything runs (it would be shared as its JSON)', async () => {
    class Principal {
      readonly #id = 'alice';
      id() {
        return this.#id;
      }
    }
    const { runner, POST } = handler({
      scope: (() => new Principal()) as unknown as TransactionalHandlerOptions['scope'],
    });
    await expect(POST(post())).rejects.toThrow(/scope: expected a string/);
    expect(runner.claims).toEqual([]);
  });

  it('with scopeCookies, digests Authorization and those cookies only', async () => {
    const { runner, POST } = handler({ scopeCookies: ['session'] });
    await POST(post({ cookie: 'session=s1; lb=a' }));
    await POST(post({ cookie: 'lb=b; session=s1' }));
    await POST(post({ cookie: 'session=s2' }));
    const [first, retry, other] = runner.claims.map((claim) => claim.scope);
    expect(retry).toBe(first);
    expect(other).not.toBe(first);
  });
});

describe('transactional route answers', () => {
  it.each([
    ['a Buffer', Buffer.from('abc')],
    ['a Uint8Array', new Uint8Array([97, 98, 99])],
    ['an ArrayBuffer', new Uint8Array([97, 98, 99]).buffer],
    ['a view of part of a buffer', new Uint8Array([0, 97, 98, 99, 0]).subarray(1, 4)],
    ['a DataView', new DataView(new Uint8Array([0, 97, 98, 99]).buffer, 1)],
  ])('sends %s as its bytes, not as JSON', async (_name, body) => {
    const { POST } = handler(
      {},
      {
        status: 200,
        body,
        headers: { 'content-type': 'application/octet-stream' },
      },
    );
    const answer = await POST(post());
    expect(await answer.text()).toBe('abc');
    expect(answer.headers.get('content-type')).toBe('application/octet-stream');
  });

  it('answers 400 invalid_key to a key shorter than minKeyLength, without a transaction', async () => {
    const { runner, POST } = handler({ minKeyLength: 36 });
    const answer = await POST(post());
    expect(answer.status).toBe(400);
    expect(await answer.json()).toMatchObject({
      code: 'invalid_key',
      detail: 'Invalid idempotency key: must be at least 36 characters long',
    });
    expect(runner.claims).toEqual([]);
  });

  it('fingerprints the fingerprintHeaders', async () => {
    const { runner, POST } = handler({ fingerprintHeaders: ['API-Version'] });
    await POST(post({ 'api-version': '1' }));
    await POST(post({ 'api-version': '1' }));
    await POST(post({ 'api-version': '2' }));
    const [one, same, two] = runner.claims.map((claim) => claim.fingerprint);
    expect(same).toBe(one);
    expect(two).not.toBe(one);
  });
});
