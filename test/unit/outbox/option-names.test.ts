/**
 * Every outbox component refuses an option name it does not know. A misspelt `tabel` on `enqueue` wrote
 * the default table while the relay's source read the configured one, so the message was committed with
 * the business writes and never published; a consumer's spelling on the relay (`pollInterval`) left the
 * default in force without a word.
 */
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import {
  amqpPublisher,
  createRelay,
  enqueue,
  migrateOutbox,
  natsPublisher,
  type PgQueryable,
  postgresOutboxSource,
  sqliteOutboxSource,
} from '../../../src/outbox/index.js';
import { memorySource } from '../../helpers/outbox-memory-source.js';
import { recordingPublisher } from '../../helpers/outbox-recorder.js';

const refusal = (message: RegExp) =>
  expect.objectContaining({ code: 'invalid_options', message: expect.stringMatching(message) });

const database = new Database(':memory:');
afterAll(() => database.close());

// Records every statement: an option check must come before any.
function recordingClient() {
  const sent: string[] = [];
  const client: PgQueryable = {
    query: async (text: string) => {
      sent.push(text);
      return { rows: [{ in_transaction: true, id: '1' }], rowCount: 1 };
    },
  } as unknown as PgQueryable;
  return { client, sent };
}

const message = { topic: 'payment.initiated', key: 'p1', payload: { id: 'p1' } };

describe('outbox option names', () => {
  it('createRelay refuses an unknown option, naming the accepted ones', () => {
    // Act / Assert
    expect(() =>
      createRelay({
        source: memorySource(),
        publisher: recordingPublisher(),
        pollInterval: 10,
      } as never),
    ).toThrow(
      refusal(
        /^createRelay: unknown field "pollInterval"; the fields are source, publisher, .*pollIntervalMs/,
      ),
    );
  });

  it('the sources and publishers refuse an unknown option', () => {
    // Arrange
    const { client } = recordingClient();
    const js = { publish: async () => ({ duplicate: false, seq: 1, stream: 's' }) } as never;
    const channel = {
      publish: () => true,
      on: () => undefined,
      waitForConfirms: async () => {},
    } as never;

    // Act / Assert
    expect(() =>
      postgresOutboxSource({ pool: client, listen: false, tabel: 'x' } as never),
    ).toThrow(
      refusal(/^postgresOutboxSource: unknown field "tabel"; the fields are pool, schema, table/),
    );
    expect(() => sqliteOutboxSource({ database, tabel: 'x' } as never)).toThrow(
      refusal(/^sqliteOutboxSource: unknown field "tabel"; the fields are database, table, clock$/),
    );
    expect(() => natsPublisher({ js, timeout: 5000 } as never)).toThrow(
      refusal(
        /^natsPublisher: unknown field "timeout"; the fields are js, subject, headers, timeoutMs/,
      ),
    );
    expect(() => amqpPublisher({ channel, exhange: 'events' } as never)).toThrow(
      refusal(/^amqpPublisher: unknown field "exhange"; the fields are channel, exchange/),
    );
  });

  it('enqueue on PostgreSQL rejects an unknown option before any statement', async () => {
    // Arrange
    const { client, sent } = recordingClient();

    // Act
    const enqueued = enqueue(client, message, { tabel: 'payments_outbox' } as never);

    // Assert
    await expect(enqueued).rejects.toThrow(
      refusal(
        /^enqueue: unknown field "tabel"; the fields are schema, table, clock, verifyTransaction, maxPayloadBytes$/,
      ),
    );
    expect(sent).toEqual([]);
  });

  it('enqueue on PostgreSQL refuses a verifyTransaction that is not a boolean (0 would skip the check)', async () => {
    // Arrange
    const { client, sent } = recordingClient();

    // Act
    const enqueued = enqueue(client, message, { verifyTransaction: 0 } as never);

    // Assert
    await expect(enqueued).rejects.toThrow(
      refusal(/^enqueue: verifyTransaction: expected true or false, got 0$/),
    );
    expect(sent).toEqual([]);
  });

  it('enqueue and migrateOutbox on SQLite throw for an unknown option, and take the documented ones', () => {
    // Arrange
    migrateOutbox(database);

    // Act / Assert
    expect(() => migrateOutbox(database, { tabel: 'x' } as never)).toThrow(
      refusal(/^migrateOutbox: unknown field "tabel"/),
    );
    expect(() =>
      database.transaction(() => enqueue(database, message, { tabel: 'x' } as never))(),
    ).toThrow(refusal(/^enqueue: unknown field "tabel"/));
    const result = database.transaction(() =>
      enqueue(database, message, { table: 'idempotency_outbox' }),
    )();
    expect(result.messageId).toEqual(expect.any(String));
  });
});
