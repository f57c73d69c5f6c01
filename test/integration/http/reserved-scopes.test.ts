/**
 * An HTTP scope never addresses a component's records: a `scope` function returning `consumer:orders` (a
 * tenant so named, a header's value the caller chose) used to share the storage keys of consumer `orders`,
 * in the same namespace and with the same key. The worker then skipped a message as a duplicate of the
 * request, and the request met the worker's record. Such scopes are now keyed apart; every other scope,
 * HTTP or a component's own, keeps the storage key it always had (pinned below: computed by the release
 * before the change, so records stored before an upgrade are still found after it).
 *
 * On a SQLite file, the middleware (`withIdempotency`) and a transactional route (`transactionalHandler`)
 * sharing one store and namespace with a consumer.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { deadLetterScope } from '../../../src/consumer/given-up.js';
import { handedBackScope } from '../../../src/consumer/handed-back.js';
import {
  type Delivery,
  processDelivery,
  resolveConsumerOptions,
} from '../../../src/consumer/index.js';
import { idempotencyOf, transactionalHandler, withIdempotency } from '../../../src/fetch/index.js';
import { createIdempotency } from '../../../src/index.js';
import { sqliteStore, sqliteTransactional } from '../../../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-reserved-scopes-'));
const database = new Database(join(dir, 'records.db'));
const engine = createIdempotency({ store: sqliteStore({ database }), extendLease: false });

afterAll(() => {
  database.close();
  rmSync(dir, { recursive: true, force: true });
});

/** An API whose scope is the tenant the request names, as a multi-tenant API's lookup may give. */
function api() {
  const storageKeys: string[] = [];
  let runs = 0;
  const handler = withIdempotency(
    async (request: Request) => {
      runs++;
      storageKeys.push(idempotencyOf(request)?.storageKey ?? 'none');
      return Response.json({ order: 'created' }, { status: 201 });
    },
    { engine, scope: (request) => request.headers.get('x-tenant') ?? 'none' },
  );
  return { handler, storageKeys, runs: () => runs };
}

const post = (key: string, tenant: string, authorization?: string) =>
  new Request('http://localhost/orders', {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'idempotency-key': key,
      'x-tenant': tenant,
      ...(authorization === undefined ? {} : { authorization }),
    },
    body: '{"item":"book"}',
  });

/** Consumer `orders`, keyed by message id, on the API's engine. */
function worker() {
  const options = resolveConsumerOptions<{ id: string }>(
    { idempotency: engine, name: 'orders' },
    (message) => message.id,
  );
  let runs = 0;
  const deliver = async (id: string) => {
    const acks: string[] = [];
    const delivery: Delivery<{ id: string }> = {
      message: { id },
      deliveryCount: 1,
      ack: () => void acks.push('ack'),
      retry: () => void acks.push('retry'),
      deadLetter: () => void acks.push('dead_letter'),
    };
    await processDelivery(options, () => void runs++, delivery);
    return acks;
  };
  return { deliver, runs: () => runs };
}

describe('an HTTP scope under a reserved prefix', () => {
  it("does not make consumer orders skip a message whose id is a request's key", async () => {
    // Arrange: the API answers tenant `consumer:orders`'s request with key order-1001.
    const { handler } = api();
    const { deliver, runs } = worker();
    expect((await handler(post('order-1001', 'consumer:orders'))).status).toBe(201);
    // Act: the worker gets message order-1001.
    const acks = await deliver('order-1001');
    // Assert: it ran (before, it acked it as a duplicate of the request without running).
    expect(runs()).toBe(1);
    expect(acks).toEqual(['ack']);
  });

  it("is not answered from consumer orders' record of the same key", async () => {
    // Arrange: the worker has processed message order-1002.
    const { deliver } = worker();
    await deliver('order-1002');
    const { handler, runs } = api();
    // Act
    const response = await handler(post('order-1002', 'consumer:orders'));
    // Assert: the request ran (before: 422, the worker's record taken for a reuse of the key).
    expect(response.status).toBe(201);
    expect(runs()).toBe(1);
  });

  it("keys the handed-back and dead-letter scopes apart from the consumer's records too", async () => {
    // Arrange
    const { handler, storageKeys } = api();
    // Act
    await handler(post('orders:7#2', 'handed-back:orders'));
    await handler(post('orders:7', 'dead-letter:orders'));
    // Assert
    expect(storageKeys).toEqual([
      '183031c08900ec583461072574b69de579851f7c93cf6dccffff47df63776fa0',
      '1547f505ab690a645e798e2965cca87e7c14dc365558ab6938e96ba4854bd991',
    ]);
    expect(storageKeys[0]).not.toBe(engine.storageKeyFor('orders:7#2', handedBackScope('orders')));
    expect(storageKeys[1]).not.toBe(engine.storageKeyFor('orders:7', deadLetterScope('orders')));
  });

  it("keeps a transactional route's records apart from the consumer's", async () => {
    // Arrange
    const POST = transactionalHandler(
      sqliteTransactional({ database }),
      () => ({ status: 201, body: { order: 'created' } }),
      { scope: (request) => request.headers.get('x-tenant') ?? 'none' },
    );
    const { deliver, runs } = worker();
    expect((await POST(post('order-1003', 'consumer:orders'))).status).toBe(201);
    // Act
    await deliver('order-1003');
    // Assert
    expect(runs()).toBe(1);
  });
});

describe('storage keys that do not change', () => {
  it("keeps every other HTTP scope's storage key (pinned from the release before the change)", async () => {
    // Arrange
    const { handler, storageKeys } = api();
    const credentials = withIdempotency(
      async (request: Request) => {
        storageKeys.push(idempotencyOf(request)?.storageKey ?? 'none');
        return new Response(null, { status: 204 });
      },
      { engine },
    );
    // Act: a tenant's own scope, one with a colon, and the default scope (a credentials digest).
    await handler(post('order-1001', 'acme'));
    await handler(post('order-1001', 'consumer-orders'));
    await credentials(post('order-1001', 'ignored', 'Bearer alice'));
    // Assert
    expect(storageKeys).toEqual([
      '9d8aabcf2c4148152574d68ec5b233adab11a0bf8d1733bb12f4870f387c6f2d',
      engine.storageKeyFor('order-1001', 'consumer-orders'),
      '5e45f4b7454baf7db5576268b19501af54f6cfa5eebc00306dd62b64e72f824c',
    ]);
  });

  it("keeps the consumer's own storage keys", () => {
    expect(engine.storageKeyFor('order-1001', 'consumer:orders')).toBe(
      '9f0ff33506fbe9a8b9317972e6facbf9724c8337b17919dc6f715f196ec1b930',
    );
    expect(engine.storageKeyFor('orders:7#2', handedBackScope('orders'))).toBe(
      '167eb263c044aa832d0f4dacdd4ed50720866ba1d2fa93181d819f390b21d27a',
    );
    expect(engine.storageKeyFor('orders:7', deadLetterScope('orders'))).toBe(
      'e9d7725f84fd090d4070bb5bed18f9f39fe7bf37854dbcbbea8705a427028946',
    );
  });
});
