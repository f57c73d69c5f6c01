/**
 * The dead letter's headers fit the 64 KiB JetStream stores: their size is counted as the NATS client
 * encodes them, and the message's largest headers go first, named, never the adapter's. They also fit a
 * smaller budget, what a payload near `max_payload` leaves: the values the adapter adds are cut short
 * first, then the message's largest headers left out.
 */
import { headers } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import type { DeadLetter } from '../../../src/consumer/index.js';
import {
  COMPACT_HEADER_VALUE_BYTES,
  deadLetterHeaders,
  fittedDeadLetterHeaders,
  headersBytes,
  MAX_HEADERS_BYTES,
} from '../../../src/nats/dead-letter.js';
import type { NatsJsMsg } from '../../../src/nats/nats-types.js';

const letter: DeadLetter = {
  consumer: 'payments',
  key: 'pay-1',
  reason: 'handler_error',
  error: { name: 'Error', message: 'declined' },
  deliveryCount: 1,
  failedAt: '2026-01-01T00:00:00.000Z',
};

function message(sent: ReturnType<typeof headers>): NatsJsMsg {
  return {
    subject: 'orders',
    data: new Uint8Array(),
    headers: sent,
    info: { deliveryCount: 1, stream: 'ORDERS', streamSequence: 7 },
  } as unknown as NatsJsMsg;
}

describe('NATS dead letter headers within 64 KiB', () => {
  it('counts the bytes the client encodes', () => {
    const h = headers();
    h.set('a', 'ünï');
    h.append('a', 'second');
    h.set('x-b', 'value');
    // The client's own wire encoding (MsgHdrsImpl.encode, not in the MsgHdrs type).
    const wire = (h as unknown as { encode(): Uint8Array }).encode();
    expect(headersBytes(h)).toBe(wire.length);
  });

  it("leaves the message's largest headers out, named, until the copy fits", () => {
    const sent = headers();
    sent.set('Nats-Msg-Id', 'pay-1');
    sent.set('small', 's');
    sent.set('big', 'b'.repeat(30_000));
    sent.set('bigger', 'c'.repeat(36_000));
    const fitted = fittedDeadLetterHeaders(headers, message(sent), letter);
    expect(headersBytes(fitted)).toBeLessThanOrEqual(MAX_HEADERS_BYTES);
    expect(fitted.get('x-idempotency-omitted-headers')).toBe('bigger');
    expect(fitted.get('big')).toBe(sent.get('big'));
    expect(fitted.get('small')).toBe('s');
    expect(fitted.get('x-idempotency-dead-letter-reason')).toBe('handler_error');
  });

  it('copies every header of a message that fits', () => {
    const sent = headers();
    sent.set('trace', 't'.repeat(1000));
    const fitted = fittedDeadLetterHeaders(headers, message(sent), letter);
    expect(fitted.get('trace')).toBe(sent.get('trace'));
    expect(fitted.has('x-idempotency-omitted-headers')).toBe(false);
  });

  it("cuts the values it adds, keeping the message's headers, to fit what the payload leaves", () => {
    const sent = headers();
    sent.set('trace', 't'.repeat(1000));
    const long = { ...letter, error: { name: 'Error', message: 'x'.repeat(3000) } };
    const full = headersBytes(deadLetterHeaders(headers(), message(sent), long));
    const fitted = fittedDeadLetterHeaders(headers, message(sent), long, full - 100);
    expect(headersBytes(fitted)).toBeLessThanOrEqual(full - 100);
    expect(fitted.get('trace')).toBe(sent.get('trace'));
    expect(fitted.get('x-idempotency-truncated-headers')).toBe('x-idempotency-error');
    const error = JSON.parse(fitted.get('x-idempotency-error'));
    expect(Buffer.byteLength(fitted.get('x-idempotency-error'))).toBeLessThanOrEqual(
      COMPACT_HEADER_VALUE_BYTES,
    );
    expect(error.message.startsWith('xxx')).toBe(true);
  });

  it("fits thousands of the message's headers in time linear in their number, the key kept", () => {
    // Arrange: 5000 one-byte headers (55 KB) and a payload that leaves only them room: the original fit
    // max_payload, so its letter must leave some of them out.
    const sent = headers();
    sent.set('Nats-Msg-Id', 'pay-1');
    for (let i = 0; i < 5000; i++) sent.set(`h${String(i).padStart(5, '0')}`, 'v');
    const budget = headersBytes(sent) + 10;
    const long = { ...letter, error: { name: 'Error', message: 'card declined '.repeat(50) } };
    // Act
    const started = performance.now();
    const fitted = fittedDeadLetterHeaders(headers, message(sent), long, budget);
    const elapsed = performance.now() - started;
    // Assert: before, each header left out rebuilt all the others, 15–22 s with the event loop blocked
    // (ack_wait ran out, and the server redelivered this message and the others in flight).
    expect(elapsed).toBeLessThan(100);
    expect(headersBytes(fitted)).toBeLessThanOrEqual(budget);
    expect(fitted.get('x-idempotency-key')).toBe('pay-1');
    expect(fitted.get('x-idempotency-dead-letter-reason')).toBe('handler_error');
    // The list is bounded as any value the adapter adds, the names past it counted.
    const omitted = fitted.get('x-idempotency-omitted-headers');
    expect(Buffer.byteLength(omitted)).toBeLessThanOrEqual(COMPACT_HEADER_VALUE_BYTES);
    const listed = omitted.split(',');
    const more = Number(/^\+(\d+) more$/.exec(listed.pop() ?? '')?.[1]);
    const kept = [...fitted].filter(([name]) => /^h\d{5}$/.test(name)).length;
    expect(listed.length + more + kept).toBe(5000);
    for (const name of listed) expect(fitted.has(name)).toBe(false);
  });

  it("then leaves the message's largest headers out, named, when cutting is not enough", () => {
    const sent = headers();
    sent.set('trace', 't'.repeat(1000));
    sent.set('small', 's');
    const fitted = fittedDeadLetterHeaders(headers, message(sent), letter, 600);
    expect(headersBytes(fitted)).toBeLessThanOrEqual(600);
    expect(fitted.get('x-idempotency-omitted-headers')).toBe('trace');
    expect(fitted.get('small')).toBe('s');
    expect(fitted.get('x-idempotency-error')).toBe(JSON.stringify(letter.error));
  });
});
