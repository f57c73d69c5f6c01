/**
 * `enqueue` refuses node-postgres's native client, which stored payloads cut at their first zero byte and
 * read as `bytea`'s escape format (test/unit/outbox/native-client.test.ts). The JavaScript client is not
 * refused: the payloads the native client mangled are stored, claimed and published byte for byte.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { env, requireService } from '../../helpers/env.js';
import { enqueue, migrateOutbox, postgresOutboxSource } from './postgres-imports.js';

let pool: pg.Pool;
const schema = `outbox_obnative_${randomBytes(5).toString('hex')}`;

beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
  pool = new pg.Pool({ connectionString: env.databaseUrl, max: 2 });
  pool.on('error', () => {});
  await migrateOutbox(pool, { schema });
});

afterAll(async () => {
  await pool?.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool?.end();
});

// What the native client stored as `61 5c 62`, refused (`invalid input syntax for type bytea`), and as `01`.
const PAYLOADS = [
  Buffer.from('a\\\\b'),
  Buffer.from('{"memo":"a\\"b"}'),
  Buffer.from([1, 0, 2, 3]),
];

describe('enqueue on the JavaScript client (PostgreSQL)', () => {
  it('stores and hands the relay every payload byte for byte', async () => {
    // Arrange
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      // Act
      for (const [index, payload] of PAYLOADS.entries()) {
        await enqueue(
          client,
          { topic: 'payment.initiated', messageId: `obnative-${index}`, payload },
          { schema },
        );
      }
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const claimed = await postgresOutboxSource({ pool, schema, listen: false }).claim(10, 60_000);
    // Assert
    expect(claimed.map((message) => [message.id, Buffer.from(message.payload)])).toEqual(
      PAYLOADS.map((payload, index) => [`obnative-${index}`, payload]),
    );
  });
});
