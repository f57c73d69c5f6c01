/**
 * `storageKeyFor` and `inspect` derive the key of an HTTP request's record when told its scope is an HTTP
 * route's (`{ http: true }`). An HTTP scope starting `consumer:`, `handed-back:` or `dead-letter:` is keyed
 * apart from those components' records (see core/reserved-scopes.ts), and both used to derive only the
 * plain shape: such a request's record was reported absent whatever its state.
 */
import { describe, expect, it } from 'vitest';
import { idempotencyOf, withIdempotency } from '../../../src/fetch/index.js';
import { createIdempotency, isInvalidOptionsError, memoryStore } from '../../../src/index.js';

/** An engine, and the storage key its HTTP middleware used for one request in `scope` with key `key`. */
async function httpRun(scope: string, key: string) {
  const engine = createIdempotency({ store: memoryStore(), namespace: 'payments' });
  let storageKey = '';
  const handler = withIdempotency(
    async (request: Request) => {
      storageKey = idempotencyOf(request)?.storageKey ?? '';
      return Response.json({ id: 'pay_1' }, { status: 201 });
    },
    { engine, scope: () => scope },
  );
  const request = new Request('http://localhost/payments', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: '{}',
  });
  expect((await handler(request)).status).toBe(201);
  return { engine, storageKey };
}

describe('storageKeyFor and inspect with { http: true }', () => {
  it('derive the key the HTTP middleware used under a reserved-looking scope', async () => {
    // Arrange
    const { engine, storageKey } = await httpRun('consumer:acme', 'order-42');
    // Act
    const http = engine.storageKeyFor('order-42', 'consumer:acme', { http: true });
    const consumers = engine.storageKeyFor('order-42', 'consumer:acme');
    const inspected = await engine.inspect('order-42', 'consumer:acme', { http: true });
    const asConsumer = await engine.inspect('order-42', 'consumer:acme');
    // Assert: the HTTP record is found only as an HTTP route's; the consumer's key is another record.
    expect(http).toBe(storageKey);
    expect(consumers).not.toBe(storageKey);
    expect(inspected).toMatchObject({ storageKey, state: 'completed' });
    expect(asConsumer).toMatchObject({ storageKey: consumers, state: 'absent' });
  });

  it.each(['acme', '', 'consumers:acme', 'handed-back', 'tenant:consumer:x'])(
    'change nothing for a scope no component reserves: %j',
    async (scope) => {
      // Arrange
      const { engine, storageKey } = await httpRun(scope, 'order-42');
      // Act / Assert
      expect(engine.storageKeyFor('order-42', scope, { http: true })).toBe(storageKey);
      expect(engine.storageKeyFor('order-42', scope)).toBe(storageKey);
      expect(engine.storageKeyFor('order-42', scope, { http: false })).toBe(storageKey);
    },
  );

  it.each(['handed-back:orders', 'dead-letter:orders'])(
    'keep the separated shape for every reserved prefix: %j',
    async (scope) => {
      // Arrange
      const { engine, storageKey } = await httpRun(scope, 'k');
      // Act / Assert
      expect(engine.storageKeyFor('k', scope, { http: true })).toBe(storageKey);
      expect(engine.storageKeyFor('k', scope)).not.toBe(storageKey);
    },
  );

  it.each([
    [{ htp: true }, /storageKeyFor: unknown field "htp"; the fields are http/],
    [{ http: 'yes' }, /storageKeyFor: http: expected true or false, got /],
    ['http', /storageKeyFor: expected options \{ http \}, got /],
  ])('refuse options %j with InvalidOptionsError', (options, message) => {
    // Arrange
    const engine = createIdempotency({ store: memoryStore() });
    let thrown: unknown;
    // Act
    try {
      engine.storageKeyFor('k', 'consumer:acme', options as { http?: boolean });
    } catch (error) {
      thrown = error;
    }
    // Assert
    expect(isInvalidOptionsError(thrown)).toBe(true);
    expect((thrown as Error).message).toMatch(message);
  });
});
