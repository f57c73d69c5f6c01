/**
 * The payments example's HTTP semantics, in process on a SQLite file (no broker needed): the answers must
 * be the idempotency layer's (400 missing/invalid key, replay with `Idempotent-Replayed: true`, 422
 * mismatch, 503 store unavailable), and a bad body must store nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApi, listen } from '../../examples/payments/api.js';
import type { PaymentsDatabase } from '../../examples/payments/database.js';
import { openSqliteDatabase } from '../../examples/payments/sqlite-database.js';

let dir: string;
let database: PaymentsDatabase;
let server: Server;
let base: string;

const body = JSON.stringify({ amount: 4200, currency: 'EUR', customer: 'cus_42' });

function post(key: string | undefined, payload = body): Promise<Response> {
  return fetch(`${base}/v1/payments`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(key === undefined ? {} : { 'idempotency-key': key }),
    },
    body: payload,
  });
}

async function problemCode(response: Response): Promise<string> {
  expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  return ((await response.json()) as { code: string }).code;
}

describe('payments API (examples/payments) on SQLite', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ik-payments-api-'));
    database = openSqliteDatabase(join(dir, 'payments.db'));
    server = await listen(createApi({ database, onError: () => {} }), '127.0.0.1', 0);
    const address = server.address();
    base = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await database.close().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers 400 missing_key without a key and 400 invalid_key for a malformed one', async () => {
    // Act
    const missing = await post(undefined);
    const invalid = await post('two, keys');
    // Assert
    expect(missing.status).toBe(400);
    expect(await problemCode(missing)).toBe('missing_key');
    expect(invalid.status).toBe(400);
    expect(await problemCode(invalid)).toBe('invalid_key');
  });

  it('refuses a bad body with 400 invalid_payment and stores nothing, so the key stays usable', async () => {
    // Arrange
    const key = 'bad-body-then-good';
    // Act
    const bad = await post(key, JSON.stringify({ amount: -1, currency: 'eur', customer: 'x' }));
    const malformed = await post(key, '{not json');
    const good = await post(key);
    // Assert
    expect(bad.status).toBe(400);
    expect(await problemCode(bad)).toBe('invalid_payment');
    expect(malformed.status).toBe(400);
    expect(await problemCode(malformed)).toBe('invalid_payment');
    expect(good.status).toBe(201);
  });

  it('creates once and replays the same 201 byte for byte, marked Idempotent-Replayed', async () => {
    // Arrange
    const key = 'create-then-replay';
    // Act
    const first = await post(key);
    const firstBody = await first.text();
    const second = await post(key);
    const secondBody = await second.text();
    // Assert
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(second.status).toBe(201);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(secondBody).toBe(firstBody);
    expect(second.headers.get('location')).toBe(first.headers.get('location'));
    const payment = JSON.parse(firstBody) as { id: string; status: string };
    expect(payment.status).toBe('initiated');
    const read = await fetch(`${base}${first.headers.get('location')}`);
    expect(read.status).toBe(200);
    expect(((await read.json()) as { id: string }).id).toBe(payment.id);
  });

  it('answers 422 key_mismatch for the same key with another body, every time', async () => {
    // Arrange
    const key = 'mismatch';
    await post(key);
    const other = JSON.stringify({ amount: 9900, currency: 'EUR', customer: 'cus_42' });
    // Act
    const answers = [await post(key, other), await post(key, other)];
    // Assert
    for (const answer of answers) {
      expect(answer.status).toBe(422);
      expect(await problemCode(answer)).toBe('key_mismatch');
    }
  });

  it('answers 404 not_found for an unknown payment', async () => {
    // Act
    const response = await fetch(`${base}/v1/payments/pay_unknown`);
    // Assert
    expect(response.status).toBe(404);
    expect(await problemCode(response)).toBe('not_found');
  });

  it('answers 503 store_unavailable with Retry-After when the database is gone', async () => {
    // Arrange
    await database.close();
    // Act
    const response = await post('after-close');
    // Assert
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await problemCode(response)).toBe('store_unavailable');
  });
});
