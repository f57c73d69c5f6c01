/**
 * node-postgres's native client (`pg.native`, pg-native over libpq) sends a `Buffer` parameter as text cut
 * at its first zero byte: through it, the store and the transactional mode stored every outcome as the
 * single byte `01`, and every replay failed with `Unknown outcome tag undefined` (reproduced with pg-native
 * 3.9 against PostgreSQL 15). Both are refused when created instead. pg-native needs libpq's headers and a
 * native build, which the project does not install: the native client is stood in for by an object of the
 * shape pg 8 gives it, inside real `pg` pools. Nothing here connects.
 */
import { EventEmitter } from 'node:events';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { isInvalidOptionsError } from '../../../src/index.js';
import {
  type PgPool,
  type PgQueryable,
  postgresStore,
  postgresTransactional,
} from '../../../src/postgres/index.js';

/**
 * node-postgres's native `Client` as pg 8 builds it (`lib/native/client.js`): each instance carries its
 * pg-native connection as `native` and its `connectionParameters`, and the prototype has `_hasActiveQuery`,
 * which the JavaScript client's has not. `connect` succeeds at once, so a `pg.Pool` can hand it out and
 * take it back.
 */
class NativeShapedClient extends EventEmitter {
  readonly native = { pq: {} };
  readonly connectionParameters: Record<string, unknown>;
  // Read by pg-pool when a connection is released: one not queryable, or ending, is discarded.
  readonly _queryable = true;
  readonly _ending = false;
  queries = 0;

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

  query(): Promise<never> {
    this.queries++;
    return Promise.reject(new Error('no I/O in unit tests'));
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

function thrown(build: () => unknown): unknown {
  try {
    build();
  } catch (error) {
    return error;
  }
  return undefined;
}

const NATIVE_REFUSED =
  /`pool` is \(or hands out\) node-postgres's native client .* cut at its first zero byte/;

describe('node-postgres native client', () => {
  it.each([
    ['a pool of native clients (pg.native.Pool)', async () => nativePool()],
    ['a native Client', async () => new NativeShapedClient()],
    ['a connection checked out of a native pool', async () => nativePool().connect()],
  ])('postgresStore refuses %s when created', async (_label, build) => {
    // Arrange
    const pool = (await build()) as unknown as PgQueryable;
    // Act
    const error = thrown(() => postgresStore({ pool }));
    // Assert
    expect(isInvalidOptionsError(error)).toBe(true);
    expect((error as Error).message).toMatch(
      new RegExp(`^postgresStore: ${NATIVE_REFUSED.source}`),
    );
  });

  it('postgresTransactional refuses a pool of native clients when created', () => {
    // Act
    const error = thrown(() => postgresTransactional({ pool: nativePool() as unknown as PgPool }));
    // Assert
    expect(isInvalidOptionsError(error)).toBe(true);
    expect((error as Error).message).toMatch(
      new RegExp(`^postgresTransactional: ${NATIVE_REFUSED.source}`),
    );
  });

  it('refuses a native connection that a wrapping pool hands out, before BEGIN, and gives it back', async () => {
    // Arrange: a pool of the user's own around a native one, known only by what it hands out.
    const inner = nativePool();
    const wrapper: PgPool = {
      query: (text, values) => inner.query(text, values),
      connect: () => inner.connect() as never,
    };
    const transactional = postgresTransactional({ pool: wrapper });
    let ran = false;
    // Act
    const outcome = transactional.runInTransaction({ key: 'pgnative-wrapped' }, () => {
      ran = true;
      return 'charged';
    });
    // Assert
    const error = await outcome.then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(isInvalidOptionsError(error)).toBe(true);
    expect((error as Error).message).toMatch(
      new RegExp(`^runInTransaction: ${NATIVE_REFUSED.source}`),
    );
    expect(ran).toBe(false);
    expect(inner.totalCount).toBe(1);
    expect(inner.idleCount).toBe(1);
    const [connection] = (inner as unknown as { _clients: NativeShapedClient[] })._clients;
    expect(connection?.queries).toBe(0);
    await inner.end();
  });

  it('accepts the JavaScript client: a pg.Pool and a pg.Client', () => {
    // Arrange
    const pool = new pg.Pool();
    const client = new pg.Client();
    // Act + Assert
    expect(() => postgresStore({ pool })).not.toThrow();
    expect(() => postgresStore({ pool: client })).not.toThrow();
    expect(() => postgresTransactional({ pool })).not.toThrow();
  });
});
