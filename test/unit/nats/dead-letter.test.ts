/**
 * The headers of a NATS dead letter, built with the real `headers()` of the client (no connection): values
 * NATS would refuse or alter are percent-encoded, long ones cut, and the copy names each.
 */
import { headers } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import type { DeadLetter } from '../../../src/consumer/index.js';
import {
  deadLetterHeaders,
  ENCODED_HEADERS,
  MAX_HEADER_VALUE_BYTES,
  TRUNCATED_HEADERS,
} from '../../../src/nats/dead-letter.js';
import type { NatsJsMsg } from '../../../src/nats/index.js';

function message(original?: Array<[string, string]>): NatsJsMsg {
  const h = headers();
  for (const [name, value] of original ?? []) h.append(name, value);
  return {
    subject: 'orders',
    data: new Uint8Array(),
    headers: h,
    seq: 1,
    info: { deliveryCount: 1, stream: 'ORDERS', streamSequence: 7 },
    ack() {},
    nak() {},
    working() {},
    term() {},
  };
}

const letter = (overrides: Partial<DeadLetter>): DeadLetter => ({
  consumer: 'shipping',
  key: 'k',
  reason: 'handler_error',
  error: { name: 'Error', message: 'boom' },
  deliveryCount: 5,
  failedAt: '2026-01-01T00:00:00.000Z',
  ...overrides,
});

describe('NATS dead-letter headers', () => {
  it('percent-encodes a key NATS would refuse (CR, LF) or trim (surrounding spaces)', () => {
    // Act
    const lf = deadLetterHeaders(headers(), message(), letter({ key: 'ord-1\r\nX' }));
    const spaced = deadLetterHeaders(headers(), message(), letter({ key: ' ord-2 ' }));
    // Assert
    expect(lf.get('x-idempotency-key')).toBe('ord-1%0D%0AX');
    expect(lf.get(ENCODED_HEADERS)).toBe('x-idempotency-key');
    expect(decodeURIComponent(spaced.get('x-idempotency-key'))).toBe(' ord-2 ');
  });

  it('writes plain values unchanged and names no header', () => {
    // Act
    const h = deadLetterHeaders(headers(), message([['trace', 'a']]), letter({}));
    // Assert
    expect(h.get('x-idempotency-key')).toBe('k');
    expect(h.get('trace')).toBe('a');
    expect(h.has(ENCODED_HEADERS)).toBe(false);
    expect(h.has(TRUNCATED_HEADERS)).toBe(false);
  });

  it('copies every value of a header with several, and never Nats-Msg-Id', () => {
    // Act
    const h = deadLetterHeaders(
      headers(),
      message([
        ['Nats-Msg-Id', 'id-1'],
        ['tag', 'a'],
        ['tag', 'b'],
      ]),
      letter({}),
    );
    // Assert
    expect([...h].find(([name]) => name === 'tag')?.[1]).toEqual(['a', 'b']);
    expect(h.has('Nats-Msg-Id')).toBe(false);
  });

  it('cuts a long key and a long error to the bound, the error still valid JSON', () => {
    // Act
    const h = deadLetterHeaders(
      headers(),
      message(),
      letter({
        key: `${'k'.repeat(10_000)}\n`,
        error: { name: 'Error', message: '"\u0001'.repeat(50_000) },
      }),
    );
    // Assert
    const key = h.get('x-idempotency-key');
    expect(key.length).toBeLessThanOrEqual(MAX_HEADER_VALUE_BYTES);
    expect(() => decodeURIComponent(key)).not.toThrow();
    const error = h.get('x-idempotency-error');
    expect(Buffer.byteLength(error)).toBeLessThanOrEqual(MAX_HEADER_VALUE_BYTES);
    expect(JSON.parse(error)).toMatchObject({ name: 'Error' });
    expect(h.get(TRUNCATED_HEADERS)).toBe('x-idempotency-error,x-idempotency-key');
    expect(h.get(ENCODED_HEADERS)).toBe('x-idempotency-key');
  });

  it.each([
    ['é (2 bytes)', 'é'],
    ['€ (3 bytes)', '€'],
    ['😀 (4 bytes)', '😀'],
  ])(
    'cuts an encoded key of %s characters on a whole character, so it still decodes',
    (_, char) => {
      for (let shift = 0; shift < 12; shift++) {
        // Arrange: the LF has the key encoded; the shift moves the cut across each group of a character.
        const key = `\n${'a'.repeat(shift)}${char.repeat(3000)}`;
        // Act
        const h = deadLetterHeaders(headers(), message(), letter({ key }));
        // Assert: before, the cut could end `…%C3%A9%C3`, and decodeURIComponent threw ('URI malformed').
        const written = h.get('x-idempotency-key');
        expect(written.length).toBeLessThanOrEqual(MAX_HEADER_VALUE_BYTES);
        // At most one character's groups, less one byte, are given up to keep it whole.
        expect(written.length).toBeGreaterThan(MAX_HEADER_VALUE_BYTES - 12);
        expect(key.startsWith(decodeURIComponent(written))).toBe(true);
        expect(h.get(TRUNCATED_HEADERS)).toBe('x-idempotency-key');
      }
    },
  );
});
