/**
 * The NATS dead letter carries the key and the error in headers, and NATS refuses a header value with CR or
 * LF: a message whose custom key is invalid because of a newline must still be dead-lettered (the value
 * percent-encoded, and the copy saying so), not nak'ed forever. Values of any size are bounded.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  ENCODED_HEADERS,
  idempotentConsumer,
  MAX_HEADER_VALUE_BYTES,
  type NatsConsumer,
  type NatsJsMsg,
  TRUNCATED_HEADERS,
} from '../../../src/nats/index.js';
import { type NatsFixture, natsFixture, until } from './setup.js';

describe('NATS consumer: dead-letter headers NATS would refuse', () => {
  let fixture: NatsFixture | undefined;
  let running: NatsConsumer | undefined;

  afterEach(async () => {
    await running?.close();
    await fixture?.destroy();
    running = undefined;
    fixture = undefined;
  });

  async function start(handler: () => unknown, key?: (message: NatsJsMsg) => string) {
    const f = await natsFixture('dlq-headers');
    fixture = f;
    const events: string[] = [];
    running = await idempotentConsumer(await f.js.consumers.get(f.stream, f.durable), handler, {
      name: f.stream,
      idempotency: createIdempotency({ store: memoryStore() }),
      publisher: f.js,
      deadLetterSubject: f.dlq,
      maxDeliveries: 1,
      maxRetryDelay: '200ms',
      ...(key === undefined ? {} : { key }),
      hooks: {
        onDeadLetter: (event) => events.push(`dead-letter ${event.reason}`),
        onBrokerError: (event) => events.push(`broker-error ${event.operation}`),
      },
    });
    return { f, events };
  }

  it('dead-letters a message whose key has a newline, with the key percent-encoded', async () => {
    // Arrange
    const { f, events } = await start(
      () => {},
      (message) => JSON.parse(new TextDecoder().decode(message.data)).orderId,
    );
    // Act
    await f.publish('m1', JSON.stringify({ orderId: 'ord-1\nX' }));
    await until('the dead letter', () => events.length > 0);
    // Assert
    expect(events).toEqual(['dead-letter invalid_key']);
    const [letter, ...more] = await f.deadLetters();
    expect(more).toHaveLength(0);
    expect(letter?.header.get('x-idempotency-dead-letter-reason')).toBe('invalid_key');
    expect(letter?.header.get('x-idempotency-key')).toBe('ord-1%0AX');
    expect(decodeURIComponent(letter?.header.get('x-idempotency-key') ?? '')).toBe('ord-1\nX');
    expect(letter?.header.get(ENCODED_HEADERS)).toBe('x-idempotency-key');
  });

  it('bounds a huge error message, keeping the error header valid JSON', async () => {
    // Arrange
    const { f, events } = await start(() => {
      throw new Error(`upstream 502: ${'x'.repeat(200_000)}`);
    });
    // Act
    await f.publish('m2', 'payload');
    await until('the dead letter', () => events.length > 0);
    // Assert
    expect(events).toEqual(['dead-letter handler_error']);
    const [letter] = await f.deadLetters();
    const header = letter?.header.get('x-idempotency-error') ?? '';
    expect(Buffer.byteLength(header)).toBeLessThanOrEqual(MAX_HEADER_VALUE_BYTES);
    const error = JSON.parse(header) as { name: string; message: string };
    expect(error.name).toBe('Error');
    expect(error.message.startsWith('upstream 502: xxx')).toBe(true);
    expect(letter?.header.get(TRUNCATED_HEADERS)).toBe('x-idempotency-error');
    expect(new TextDecoder().decode(letter?.data)).toBe('payload');
  });
});
