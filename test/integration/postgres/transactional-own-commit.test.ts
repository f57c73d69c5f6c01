/**
 * The PostgreSQL transactional mode when the handler tries to end the transaction itself: a library given
 * `tx.client` that wraps its own BEGIN … COMMIT, a ROLLBACK followed by more writes, a COMMIT or ROLLBACK
 * later in a string of several statements (behind comments, strings, dollar quotes), a ROLLBACK in
 * beforeCommit. Savepoints keep working. On the real server.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isInvalidOptionsError, isStoreUnavailableError } from '../../../src/index.js';
import { postgresTransactional, type TransactionContext } from '../../../src/postgres/index.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const newKey = (label: string) => `${label}-${randomUUID()}`;

beforeAll(async () => {
  fx = await setupPostgres('txown', { max: 4 });
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

/** A data-access helper written for a plain connection: it runs its own transaction on it. */
async function chargeInOwnTransaction(client: TransactionContext['client'], ref: string) {
  await client.query('BEGIN');
  try {
    await client.query(charge(ref));
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

describe('postgresTransactional: a handler that ends the transaction itself', () => {
  it('refuses the BEGIN and COMMIT of a helper given tx.client: nothing commits, and the retry executes once', async () => {
    // Arrange
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const ref = newKey('helper');
    const key = newKey('helper');
    // Act: the helper's transaction, then a failure after it (a card declined).
    const failed = await tx
      .runInTransaction({ key }, async (t) => {
        await chargeInOwnTransaction(t.client, ref);
        return 'charged';
      })
      .catch((error: unknown) => error);
    const retry = await tx.runInTransaction({ key }, async (t) => {
      await t.query(charge(ref));
      return 'charged';
    });
    // Assert: refused before anything committed; the retry is the one execution.
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(retry.status).toBe('executed');
    expect(await chargesFor(ref)).toBe(1);
  });

  it('refuses a COMMIT followed by a failure: the key is not left in progress for an hour', async () => {
    // Arrange
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const ref = newKey('commit-throw');
    const key = newKey('commit-throw');
    // Act: the handler swallows nothing; its COMMIT is refused, so its own error is the refusal.
    const failed = await tx
      .runInTransaction({ key }, async (t) => {
        await t.query(charge(ref));
        await t.query('  /* done */ COMMIT;');
        throw new Error('card declined');
      })
      .catch((error: unknown) => error);
    const retry = await tx.runInTransaction({ key }, () => 'second');
    // Assert
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(await chargesFor(ref)).toBe(0);
    expect(retry.status).toBe('executed');
  });

  it('refuses a ROLLBACK whose later writes would commit without a record (a second charge on retry)', async () => {
    // Arrange
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const ref = newKey('rollback');
    const key = newKey('rollback');
    const handler = async (t: TransactionContext) => {
      await t.query('ROLLBACK').catch(() => {}); // "start over", ignoring a complaint
      await t.query(charge(ref));
      return 'charged';
    };
    // Act
    const first = await tx.runInTransaction({ key }, handler);
    const second = await tx.runInTransaction({ key }, handler);
    // Assert: the ROLLBACK was not run, so the charge and its record committed together, once.
    expect(first.status).toBe('executed');
    expect(second.status).toBe('replayed');
    expect(await chargesFor(ref)).toBe(1);
  });

  it('refuses a ROLLBACK after an empty statement (`; ROLLBACK`), which the server runs as a ROLLBACK', async () => {
    // Arrange
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const ref = newKey('semi-rollback');
    const key = newKey('semi-rollback');
    const handler = async (t: TransactionContext) => {
      await t.query('; ROLLBACK').catch(() => {}); // "start over", ignoring a complaint
      await t.query(charge(ref));
      return 'charged';
    };
    // Act
    const first = await tx.runInTransaction({ key }, handler);
    const second = await tx.runInTransaction({ key }, handler);
    // Assert: refused as ROLLBACK is; the charge and its record committed together, once.
    expect([first.status, second.status]).toEqual(['executed', 'replayed']);
    expect(await chargesFor(ref)).toBe(1);
  });

  it('refuses a COMMIT inside a string of several statements before any of it runs: the retry charges once', async () => {
    // Arrange
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const ref = newKey('multi');
    const key = newKey('multi');
    // Act
    const failed = await tx
      .runInTransaction({ key }, async (t) => {
        await t.query(`${charge(ref)}; COMMIT`);
        return 'charged';
      })
      .catch((error: unknown) => error);
    const chargedByRefused = await chargesFor(ref);
    const retry = await tx.runInTransaction({ key }, async (t) => {
      await t.query(charge(ref));
      return 'again';
    });
    // Assert: refused, nothing of it committed (the claim neither: no key left in progress for an hour).
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(chargedByRefused).toBe(0);
    expect(retry.status).toBe('executed');
    expect(await chargesFor(ref)).toBe(1);
  });

  it('refuses a ROLLBACK later in a string of several statements, whose INSERT would commit with no record (a second charge on retry)', async () => {
    // Arrange
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const ref = newKey('multi-rollback');
    const key = newKey('multi-rollback');
    const handler = async (t: TransactionContext) => {
      await t.query(`SELECT 1; ROLLBACK; ${charge(ref)}`);
      return 'charged';
    };
    // Act: the run fails; its caller retries, as for any failure, and the handler is fixed by then.
    const failed = await tx.runInTransaction({ key }, handler).catch((error: unknown) => error);
    const retry = await tx.runInTransaction({ key }, async (t) => {
      await t.query(charge(ref));
      return 'charged';
    });
    const replay = await tx.runInTransaction({ key }, handler);
    // Assert: the handler's error, not an outage to retry blindly; one charge, with its record.
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(isStoreUnavailableError(failed)).toBe(false);
    expect([retry.status, replay.status]).toEqual(['executed', 'replayed']);
    expect(await chargesFor(ref)).toBe(1);
  });

  it.each([
    ['a nested block comment', (c: string) => `SELECT 1; /* a /* nested */ note */ ROLLBACK; ${c}`],
    ['a dollar quote', (c: string) => `SELECT $$x;$$; ABORT; ${c}`],
    ['a tagged dollar quote', (c: string) => `SELECT $t$ $$; $t$; ROLLBACK WORK; ${c}`],
    ['a string and a quoted identifier', (c: string) => `SELECT ';' AS "x;"; END; ${c}`],
    ['an E string', (c: string) => `SELECT E'\\';'; -- ;\n rollback; ${c}`],
    // The continuation of an E string takes its escapes; neither reading of plain strings sees that.
    ['an E string continued', (c: string) => `SELECT E''\n'\\' '|| '\\'; ROLLBACK; ${c}; --'`],
    // `AS case` is no CASE: the body ends at its END, and the ROLLBACK after it runs.
    [
      'a BEGIN ATOMIC body with a column named case',
      (c: string) =>
        `CREATE FUNCTION pg_temp.f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1 AS case; END; ROLLBACK; ${c}`,
    ],
  ])(
    'refuses a ROLLBACK behind %s, and the caught refusal leaves the charge in the transaction',
    async (_label, text) => {
      // Arrange
      const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
      const ref = newKey('tricks');
      const key = newKey('tricks');
      const handler = async (t: TransactionContext) => {
        // A query config, as libraries send ("start over", ignoring a complaint).
        const sendConfig = t.client.query as unknown as (config: {
          text: string;
        }) => Promise<unknown>;
        await sendConfig.call(t.client, { text: text(charge(ref)) }).catch(() => {});
        await t.query(charge(ref));
        return 'charged';
      };
      // Act
      const first = await tx.runInTransaction({ key }, handler);
      const second = await tx.runInTransaction({ key }, handler);
      // Assert: nothing of the refused text ran; the charge and its record committed together, once.
      expect([first.status, second.status]).toEqual(['executed', 'replayed']);
      expect(await chargesFor(ref)).toBe(1);
    },
  );

  it('fails loudly when beforeCommit rolled the transaction back, instead of reporting a success that wrote nothing', async () => {
    // Arrange
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const ref = newKey('before');
    const key = newKey('before');
    // Act
    const failed = await tx
      .runInTransaction(
        { key },
        async (t) => {
          await t.query(charge(ref));
          return 'charged';
        },
        { beforeCommit: async (t) => void (await t.query('SELECT 1; ROLLBACK')) },
      )
      .catch((error: unknown) => error);
    // Assert
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(await chargesFor(ref)).toBe(0);
    expect((await tx.runInTransaction({ key }, () => 'next')).status).toBe('executed');
  });

  it('still lets the handler use savepoints', async () => {
    // Arrange
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const kept = newKey('kept');
    const undone = newKey('undone');
    // Act
    const outcome = await tx.runInTransaction({ key: newKey('savepoint') }, async (t) => {
      await t.query(charge(kept));
      await t.query('SAVEPOINT attempt');
      await t.query(charge(undone));
      await t.query('ROLLBACK TO SAVEPOINT attempt');
      await t.query('rollback work to attempt');
      await t.query('RELEASE SAVEPOINT attempt');
      return 'ok';
    });
    // Assert
    expect(outcome.status).toBe('executed');
    expect(await chargesFor(kept)).toBe(1);
    expect(await chargesFor(undone)).toBe(0);
  });
});
