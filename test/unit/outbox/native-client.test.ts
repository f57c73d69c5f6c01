/**
 * node-postgres's native client (`pg.native`, pg-native over libpq) sends `enqueue`'s payload, a bare
 * `Buffer`, as text cut at its first zero byte and read in `bytea`'s escape format: `61 5c 5c 62` was
 * stored as `61 5c 62`, `01 00 02 03` as `01`, and a payload with `\"` was refused (`invalid input syntax
 * for type bytea`), in the caller's transaction (reproduced with pg-native 3.9 against PostgreSQL 15); the
 * relay then published the altered bytes. `enqueue` refuses such a connection before sending anything.
 * pg-native needs libpq's headers and a native build, which the project does not install: the native
 * client is stood in for by an object of the shape pg 8 gives it, as in test/unit/postgres. Nothing here
 * connects.
 */
import { EventEmitter } from 'node:events';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { isInvalidOptionsError } from '../../../src/index.js';
import { enqueue, type PgQueryable, postgresOutboxSource } from '../../../src/outbox/index.js';

/**
 * node-postgres's native `Client` as pg 8 builds it (`lib/native/client.js`): each instance carries its
 * pg-native connection as `native` and its `connectionParameters`, and the prototype has `_hasActiveQuery`,
 * which the JavaScript client's has not. Every statement is counted and answered as if inside a
 * transaction block, so an `enqueue` that got through would insert.
 */
class NativeShapedClient extends EventEmitter {
  readonly native = { pq: {} };
  readonly connectionParameters: Record<string, unknown>;
  // Read by pg-pool when a connection is released: one not queryable, or ending, is discarded.
  readonly _queryable = true;
  readonly _ending = false;
  readonly statements: string[] = [];

  constructor(config: Record<string, unknown> = {}) {
    super();
    this.connectionParameters = { ...config };
  }

  _hasActiveQuery(): boolean {
    return false;
  }

  connect(callback?: (error?: Error) => void): Promise<void> | undefined {
    if (callback === undefined) return Promise.resolve();
    callback();
    return undefined;
  }

  // A pg.Pool's own query() passes a callback; a caller of a connection awaits the promise.
  query(
    text: string,
    _values?: unknown[],
    callback?: (error: Error | undefined, result: unknown) => void,
  ): Promise<{ rows: unknown[]; rowCount: number }> | undefined {
    this.statements.push(text);
    const result = { rows: [{ in_transaction: true, id: '1' }], rowCount: 1 };
    if (callback === undefined) return Promise.resolve(result);
    callback(undefined, result);
    return undefined;
  }

  end(callback?: () => void): Promise<void> | undefined {
    if (callback === undefined) return Promise.resolve();
    callback();
    return undefined;
  }
}

/** What `pg.native.Pool` is: a `pg.Pool` whose connections are native clients. */
function nativePool(): pg.Pool {
  return new pg.Pool({ Client: NativeShapedClient as unknown as typeof pg.Client });
}

const NATIVE_REFUSED =
  /^enqueue: `tx` is \(or is a pool of\) node-postgres's native client .* cut at its first zero byte: the message's payload would be stored cut short or altered/;

// A payment message whose bytes the native client mangled: a zero byte, `\\` and `\"`.
const PAYLOAD = Buffer.concat([Buffer.from('{"memo":"a\\\\b \\"c\\""}'), Buffer.from([0, 1])]);

describe('enqueue on node-postgres native client', () => {
  it('refuses a native connection inside its transaction, sending nothing', async () => {
    // Arrange: a connection checked out of a native pool, after the caller's BEGIN.
    const pool = nativePool();
    const client = (await pool.connect()) as unknown as NativeShapedClient & pg.PoolClient;
    await client.query('BEGIN');
    // Act
    const error = await enqueue(client as PgQueryable, {
      topic: 'payment.initiated',
      key: 'obnative-p1',
      payload: PAYLOAD,
    }).then(
      () => undefined,
      (reason: unknown) => reason,
    );
    // Assert
    expect(isInvalidOptionsError(error)).toBe(true);
    expect((error as Error).message).toMatch(NATIVE_REFUSED);
    expect((error as Error).message).toContain('nothing was inserted');
    expect(client.statements).toEqual(['BEGIN']);
    client.release();
    await pool.end();
  });

  it('refuses a native Client, and a native pool, before any statement', async () => {
    // Arrange
    const client = new NativeShapedClient();
    const pool = nativePool();
    const message = { topic: 'payment.initiated', payload: PAYLOAD };
    // Act
    const errors = await Promise.all(
      [client as unknown as PgQueryable, pool].map((tx) =>
        enqueue(tx, message, { verifyTransaction: false }).then(
          () => undefined,
          (reason: unknown) => reason,
        ),
      ),
    );
    // Assert
    for (const error of errors) {
      expect(isInvalidOptionsError(error)).toBe(true);
      expect((error as Error).message).toMatch(NATIVE_REFUSED);
    }
    expect(client.statements).toEqual([]);
    expect(pool.totalCount).toBe(0);
    await pool.end();
  });

  it('still lets a relay claim over a native pool: the source sends no bytes, and reads them intact', () => {
    // Act + Assert
    expect(() => postgresOutboxSource({ pool: nativePool(), listen: false })).not.toThrow();
  });
});
