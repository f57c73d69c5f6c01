import { describe, expect, it } from 'vitest';
import { isInvalidOptionsError } from '../../../src/core/errors.js';
import { exponentialBackoff } from '../../../src/outbox/backoff.js';
import {
  ContentType,
  decodePayload,
  encodePayload,
  prepareMessage,
} from '../../../src/outbox/message.js';
import { postgresOutboxNames, renderOutboxSql } from '../../../src/outbox/names.js';

describe('payload encoding', () => {
  it('round-trips JSON, text and bytes with the matching content type', () => {
    // Arrange
    const cases: Array<[unknown, string]> = [
      [{ a: [1, 'x'] }, ContentType.Json],
      ['héllo', ContentType.Text],
      [new Uint8Array([0, 255, 7]), ContentType.Binary],
    ];

    for (const [payload, type] of cases) {
      // Act
      const encoded = encodePayload(payload);
      const decoded = decodePayload({ payload: encoded.bytes, contentType: encoded.contentType });

      // Assert
      expect(encoded.contentType).toBe(type);
      expect(payload instanceof Uint8Array ? [...(decoded as Uint8Array)] : decoded).toEqual(
        payload instanceof Uint8Array ? [...payload] : payload,
      );
    }
  });

  it('stores an ArrayBuffer or any ArrayBuffer view as its bytes, not as JSON "{}"', () => {
    // Arrange
    const bytes = new Uint8Array([1, 2, 3, 4]);
    const cases: unknown[] = [
      bytes.buffer,
      new DataView(bytes.buffer),
      new Uint16Array(bytes.buffer),
      new Uint8Array(bytes.buffer, 1, 2),
    ];

    // Act
    const encoded = cases.map((payload) => encodePayload(payload));

    // Assert
    expect(encoded.map((e) => [e.contentType, [...e.bytes]])).toEqual([
      [ContentType.Binary, [1, 2, 3, 4]],
      [ContentType.Binary, [1, 2, 3, 4]],
      [ContentType.Binary, [1, 2, 3, 4]],
      [ContentType.Binary, [2, 3]],
    ]);
    expect(() => encodePayload(new Map([['a', 1]]))).toThrow(
      expect.toSatisfy(isInvalidOptionsError),
    );
  });

  it('refuses payloads JSON cannot represent', () => {
    // Arrange
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;

    // Act / Assert
    expect(() => encodePayload(undefined)).toThrow(expect.toSatisfy(isInvalidOptionsError));
    expect(() => encodePayload(cyclic)).toThrow(expect.toSatisfy(isInvalidOptionsError));
  });
});

describe('prepareMessage', () => {
  it('keeps a given messageId and generates a distinct one otherwise', () => {
    // Arrange / Act
    const given = prepareMessage({ topic: 't', payload: 1, messageId: 'idem-1' });
    const a = prepareMessage({ topic: 't', payload: 1 });
    const b = prepareMessage({ topic: 't', payload: 1 });

    // Assert
    expect(given.messageId).toBe('idem-1');
    expect(a.messageId).not.toBe(b.messageId);
    expect(a.headers).toBe('{}');
  });

  it('refuses an empty topic, an oversized id and non-string headers', () => {
    // Arrange
    const bad = [
      { topic: '', payload: 1 },
      { topic: 't', payload: 1, messageId: 'x'.repeat(256) },
      { topic: 't', payload: 1, headers: { n: 1 as unknown as string } },
    ];

    // Act / Assert
    for (const message of bad)
      expect(() => prepareMessage(message)).toThrow(expect.toSatisfy(isInvalidOptionsError));
  });
});

describe('prepareMessage: what no store can hold', () => {
  it('refuses NUL in the text fields, headers that are not an object of strings, and an empty content type', () => {
    // Arrange: a NUL fails the PostgreSQL insert (as "store unavailable", were it not refused first).
    const bad: unknown[] = [
      { topic: 't', payload: 1, headers: 'abc' },
      { topic: 't', payload: 1, headers: ['x'] },
      { topic: 'a\u0000b', payload: 1 },
      { topic: 't', payload: 1, key: 'k\u0000' },
      { topic: 't', payload: 1, messageId: 'id\u0000' },
      { topic: 't', payload: 1, headers: { 'x\u0000': 'v' } },
      { topic: 't', payload: 1, headers: { trace: 'a\u0000' } },
      { topic: 't', payload: 1, contentType: '' },
      { topic: 't', payload: 1, contentType: 5 },
    ];

    // Act / Assert
    for (const message of bad)
      expect(() => prepareMessage(message as never), JSON.stringify(message)).toThrow(
        expect.toSatisfy(isInvalidOptionsError),
      );
  });

  it('keeps headers RabbitMQ and Redis Streams carry as they are, though NATS would refuse them', () => {
    // Spaces and non-ASCII in names, a line break in a value: the NATS publisher says so for its rows.
    const headers = { 'x-trace id': 'a', 'x-ünicode': 'b', 'x-note': 'line1\nline2' };
    expect(JSON.parse(prepareMessage({ topic: 't', payload: 1, headers }).headers)).toEqual(
      headers,
    );
  });
});

describe('prepareMessage: a message id every consumer can read', () => {
  it('refuses an id outside printable ASCII, which the consumers dead-letter or NATS cannot send', () => {
    // Arrange: each was committed, then dead-lettered as `invalid_key` by the AMQP, NATS and Redis Streams
    // consumers (the key rule), and the line break failed every NATS publish (a header value).
    const ids = [
      'paiement-Müller-17',
      'order\n17',
      'tab\there',
      `${'x'.repeat(254)}é`, // 255 characters, 256 bytes: over AMQP's message-id too
      '\u{1F4B3}-1',
    ];

    // Act / Assert
    for (const messageId of ids)
      expect(() => prepareMessage({ topic: 't', payload: 1, messageId }), messageId).toThrow(
        expect.toSatisfy(isInvalidOptionsError),
      );
  });

  it('keeps any 1-255 printable ASCII id, a downstream key and a UUID included', () => {
    const ids = ['ik_0d6b2b2db1e2189f53571b1fe1e6ea93036e6862', 'order 17 / eu', '~'.repeat(255)];
    for (const messageId of ids)
      expect(prepareMessage({ topic: 't', payload: 1, messageId }).messageId).toBe(messageId);
  });
});

describe('exponentialBackoff', () => {
  it('doubles from initialMs, caps at maxMs and takes off at most the jitter fraction', () => {
    // Arrange
    const exact = exponentialBackoff({ initialMs: 100, maxMs: 1000, jitter: 0 });
    const jittered = exponentialBackoff({ initialMs: 100, maxMs: 1000, jitter: 0.5 }, () => 1);

    // Act / Assert
    expect([1, 2, 3, 4, 5, 10].map(exact)).toEqual([100, 200, 400, 800, 1000, 1000]);
    expect(jittered(2)).toBe(100);
    expect(() => exponentialBackoff({ multiplier: 0.5 })).toThrow(
      expect.toSatisfy(isInvalidOptionsError),
    );
  });

  it('stays at 0 with initialMs 0 however many attempts (0 × Infinity was NaN from attempt 1025)', () => {
    // Arrange
    const none = exponentialBackoff({ initialMs: 0, maxMs: 0 });

    // Act / Assert
    expect([1, 1024, 1025, 5000].map(none)).toEqual([0, 0, 0, 0]);
    expect(exponentialBackoff({ initialMs: 1, maxMs: 5000, jitter: 0 })(5000)).toBe(5000);
  });
});

describe('outbox names', () => {
  it('quotes validated identifiers into the SQL and refuses anything else', () => {
    // Arrange
    const names = postgresOutboxNames('billing', 'outbox');

    // Act
    const sql = renderOutboxSql('SELECT 1 FROM {{table}} -- {{channelLiteral}}', names);

    // Assert
    expect(sql).toBe(`SELECT 1 FROM "billing"."outbox" -- 'billing.outbox'`);
    expect(() => postgresOutboxNames('x"; DROP', 'outbox')).toThrow(
      expect.toSatisfy(isInvalidOptionsError),
    );
    expect(postgresOutboxNames('s'.repeat(40), 't'.repeat(40)).channel).toMatch(
      /^outbox_[0-9a-f]{32}$/,
    );
  });
});
