/**
 * The PostgreSQL transactional mode when the transaction ends under the handler through a channel the
 * statement guard cannot read (here a submittable that hides its text: what a scanner hole, or a
 * library's own submittable, would let through). Every statement sent through `tx` once the connection is
 * idle is refused before it is sent, so nothing more commits in autocommit; what may have committed is
 * recorded as the key's failure, so the retry gets `ReplayedError` instead of charging again (at once after
 * a ROLLBACK, or an hour later, by a takeover of the claim a COMMIT committed). Charges are counted across
 * the first run and its retry. On the real server.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isInvalidOptionsError, isReplayedError } from '../../../src/index.js';
import { postgresTransactional, type TransactionContext } from '../../../src/postgres/index.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const newKey = (label: string) => `pgstat-${label}-${randomUUID()}`;

beforeAll(async () => {
  fx = await setupPostgres('pgstat', { max: 4 });
  await fx.pool.query(
    `CREATE TABLE "${fx.schema}".charges (id serial PRIMARY KEY, ref text NOT NULL)`,
  );
});

afterAll(async () => {
  await fx.dispose();
});

async function chargesFor(ref: string): Promise<number> {
  const { rows } = await fx.pool.query(
    `SELECT count(*)::int AS n FROM "${fx.schema}".charges WHERE ref = $1`,
    [ref],
  );
  return rows[0].n;
}

const charge = (ref: string) => `INSERT INTO "${fx.schema}".charges (ref) VALUES ('${ref}')`;

/**
 * Send `sql` through `tx.client` as a submittable whose text the guard cannot read (a `pg.Query` behind a
 * proxy that hides `text`), as a scanner hole would: the driver runs it as usual.
 */
function sendHidden(t: TransactionContext, sql: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const query = new pg.Query(sql, undefined, (error: Error | undefined) =>
      error ? reject(error) : resolve(),
    );
    const hidden = new Proxy(query, {
      get(target, property) {
        if (property === 'text') return undefined;
        const value = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    (t.client.query as unknown as (submittable: unknown) => unknown).call(t.client, hidden);
  });
}

async function keyStatus(storageKey: string): Promise<string | undefined> {
  const { rows } = await fx.pool.query(
    `SELECT status FROM "${fx.schema}".idempotency_records WHERE key = $1`,
    [storageKey],
  );
  return rows[0]?.status;
}

describe('postgresTransactional: the transaction ended under the handler', () => {
  it('refuses the writes after a ROLLBACK it could not read, and the retry does not charge again', async () => {
    // Arrange
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const ref = newKey('rollback');
    const key = newKey('rollback');
    const handler = async (t: TransactionContext) => {
      await sendHidden(t, 'ROLLBACK'); // "start over"
      await t.query(charge(ref));
      return 'charged';
    };
    // Act: the caller retries the failed run, as for any failure.
    const failed = await tx.runInTransaction({ key }, handler).catch((error: unknown) => error);
    const charged = await chargesFor(ref);
    const retry = await tx.runInTransaction({ key }, handler).catch((error: unknown) => error);
    // Assert: the charge after the end was not run (it would have committed with no record); the run's
    // failure is recorded (what ran after the end cannot be read), so the retry gets it back.
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(charged).toBe(0);
    expect(isReplayedError(retry)).toBe(true);
    expect(await chargesFor(ref)).toBe(0);
  });

  it('records the failure of writes queued behind the ROLLBACK, which committed: the retry does not charge again', async () => {
    // Arrange
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const ref = newKey('queued');
    const key = newKey('queued');
    const handler = async (t: TransactionContext) => {
      // Sent together: the charge is in the driver's queue before the ROLLBACK's answer tells of the end.
      await Promise.all([sendHidden(t, 'ROLLBACK'), t.query(charge(ref))]);
      return 'charged';
    };
    // Act
    const failed = await tx.runInTransaction({ key }, handler).catch((error: unknown) => error);
    const retry = await tx.runInTransaction({ key }, handler).catch((error: unknown) => error);
    // Assert: one charge (committed in autocommit by the first run), none more on the retry.
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(isReplayedError(retry)).toBe(true);
    expect(await chargesFor(ref)).toBe(1);
  });

  it('completes the claim a COMMIT committed with the run error: the retry gets it back, not in_progress for an hour', async () => {
    // Arrange
    const stored: boolean[] = [];
    const tx = postgresTransactional({
      pool: fx.pool,
      schema: fx.schema,
      hooks: { onFailed: (event) => void stored.push(event.stored) },
    });
    const ref = newKey('commit');
    const key = newKey('commit');
    // Act: the charge commits with the claim; the write after the COMMIT is refused.
    const failed = await tx
      .runInTransaction({ key }, async (t) => {
        await t.query(charge(ref));
        await sendHidden(t, 'COMMIT');
        await t.query(charge(ref));
        return 'charged';
      })
      .catch((error: unknown) => error);
    const retry = await tx
      .runInTransaction({ key }, async (t) => {
        await t.query(charge(ref));
        return 'again';
      })
      .catch((error: unknown) => error);
    // Assert
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(isReplayedError(retry)).toBe(true);
    expect(await chargesFor(ref)).toBe(1);
    expect(await keyStatus(tx.storageKeyFor(key))).toBe('completed');
    expect(stored).toEqual([true]);
  });

  it('records the end when the handler returns at once after a COMMIT it could not read', async () => {
    // Arrange
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const ref = newKey('commit-return');
    const key = newKey('commit-return');
    const handler = async (t: TransactionContext) => {
      await t.query(charge(ref));
      await sendHidden(t, 'COMMIT');
      return 'charged';
    };
    // Act
    const failed = await tx.runInTransaction({ key }, handler).catch((error: unknown) => error);
    const retry = await tx.runInTransaction({ key }, handler).catch((error: unknown) => error);
    // Assert
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(isReplayedError(retry)).toBe(true);
    expect(await chargesFor(ref)).toBe(1);
  });

  it('does the same on node-postgres before 8.21 (no getTransactionStatus): the connection tells the end', async () => {
    // Arrange: a pool handing out its clients without the method, as pg 8.20 did.
    const older = {
      connect: async () => {
        const client = await fx.pool.connect();
        return new Proxy(client, {
          get: (target, property) =>
            property === 'getTransactionStatus' ? undefined : Reflect.get(target, property),
        });
      },
    };
    const tx = postgresTransactional({ pool: older as typeof fx.pool, schema: fx.schema });
    const ref = newKey('older');
    const key = newKey('older');
    const handler = async (t: TransactionContext) => {
      await sendHidden(t, 'ROLLBACK');
      await t.query(charge(ref));
      return 'charged';
    };
    // Act
    const failed = await tx.runInTransaction({ key }, handler).catch((error: unknown) => error);
    const retry = await tx.runInTransaction({ key }, handler).catch((error: unknown) => error);
    // Assert
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(isReplayedError(retry)).toBe(true);
    expect(await chargesFor(ref)).toBe(0);
  });

  it('refuses, before node-postgres 8.21, a statement sent at once from the callback of the ROLLBACK', async () => {
    // Arrange: as above; the callback runs inside the client's own handling of the ROLLBACK's answer.
    const older = {
      connect: async () => {
        const client = await fx.pool.connect();
        return new Proxy(client, {
          get: (target, property) =>
            property === 'getTransactionStatus' ? undefined : Reflect.get(target, property),
        });
      },
    };
    const tx = postgresTransactional({ pool: older as typeof fx.pool, schema: fx.schema });
    const ref = newKey('older-callback');
    const key = newKey('older-callback');
    const handler = (t: TransactionContext) =>
      new Promise((resolve, reject) => {
        const query = new pg.Query('ROLLBACK', undefined, () => {
          // node-postgres's callback style, which the package's types do not spell.
          const send = t.client.query as unknown as (
            text: string,
            done: (e?: Error) => void,
          ) => void;
          send.call(t.client, charge(ref), (error) => (error ? reject(error) : resolve('charged')));
        });
        const hidden = new Proxy(query, {
          get(target, property) {
            if (property === 'text') return undefined;
            const value = Reflect.get(target, property, target);
            return typeof value === 'function' ? value.bind(target) : value;
          },
        });
        (t.client.query as unknown as (submittable: unknown) => unknown).call(t.client, hidden);
      });
    // Act
    const failed = await tx.runInTransaction({ key }, handler).catch((error: unknown) => error);
    const retry = await tx.runInTransaction({ key }, handler).catch((error: unknown) => error);
    // Assert: the charge was not sent (in autocommit, it would have committed).
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(isReplayedError(retry)).toBe(true);
    expect(await chargesFor(ref)).toBe(0);
  });

  it('replays the value a COMMIT in beforeCommit committed with the completed record', async () => {
    // Arrange
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const ref = newKey('before');
    const key = newKey('before');
    const handler = async (t: TransactionContext) => {
      await t.query(charge(ref));
      return 'charged';
    };
    // Act
    const failed = await tx
      .runInTransaction({ key }, handler, { beforeCommit: (t) => sendHidden(t, 'COMMIT') })
      .catch((error: unknown) => error);
    const retry = await tx.runInTransaction({ key }, handler);
    // Assert
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(retry.status).toBe('replayed');
    expect(retry.status === 'replayed' && retry.value).toBe('charged');
    expect(await chargesFor(ref)).toBe(1);
  });
});
