/**
 * Every consumer refuses an option it does not know, and a function option given something else, before
 * it touches the broker: a misspelt `maxDelivery` or `drainTimeoutMs` used to be ignored, leaving the
 * default in force without a word, and `key: 'x-idempotency-key'` (a header name where a function belongs)
 * failed every message as a handler error, each one retried and then dead-lettered.
 */
import { describe, expect, it } from 'vitest';
import { idempotentConsumer as amqpConsumer } from '../../../src/amqp/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  type NatsPullConsumer,
  idempotentConsumer as natsConsumer,
} from '../../../src/nats/index.js';
import {
  type RedisStreamsClient,
  idempotentConsumer as streamsConsumer,
} from '../../../src/redis-streams/index.js';
import { fakeChannel } from '../amqp/fake-channel.js';

const idempotency = createIdempotency({ store: memoryStore() });

/** Starts each consumer with `extra` added to its required options; counts what reached the broker. */
function consumers() {
  const reached: string[] = [];
  const amqp = (extra: Record<string, unknown>) => {
    const { channel } = fakeChannel();
    const counted = new Proxy(channel, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (typeof value !== 'function' || typeof property !== 'string') return value;
        if (['checkQueue', 'assertQueue', 'prefetch', 'consume'].includes(property)) {
          return (...args: unknown[]) => {
            reached.push(`amqp ${property}`);
            return value.apply(target, args);
          };
        }
        return value;
      },
    });
    return amqpConsumer(counted, () => {}, { queue: 'q', name: 'billing', idempotency, ...extra });
  };
  const nats = (extra: Record<string, unknown>) => {
    const consumer = {
      fetch: async () => {
        reached.push('nats fetch');
        throw new Error('not reached');
      },
      info: async () => {
        reached.push('nats info');
        return { config: { ack_wait: 30e9 } };
      },
    } as unknown as NatsPullConsumer;
    return natsConsumer(consumer, () => {}, { name: 'billing', idempotency, ...extra });
  };
  const streams = (extra: Record<string, unknown>) => {
    const client: RedisStreamsClient = {
      sendCommand: async (args) => {
        reached.push(`redis ${String(args[0])}`);
        return null;
      },
    };
    return streamsConsumer(client, () => {}, {
      stream: 'orders',
      group: 'g',
      name: 'billing',
      idempotency,
      ...extra,
    });
  };
  return { reached, start: { amqp, nats, streams } };
}

const refusal = (message: RegExp) =>
  expect.objectContaining({ code: 'invalid_options', message: expect.stringMatching(message) });

describe.each([
  ['amqp', 'RabbitMQ', 'prefetch'],
  ['nats', 'NATS JetStream', 'workingInterval'],
  ['streams', 'Redis Streams', 'minIdle'],
] as const)('the %s consumer', (kind, who, ownOption) => {
  it('refuses an unknown option, naming the accepted ones, before anything reaches the broker', async () => {
    // Arrange
    const { reached, start } = consumers();

    // Act
    const started = start[kind]({ maxDelivery: 3 });

    // Assert
    await expect(started).rejects.toThrow(
      refusal(
        new RegExp(
          `^idempotentConsumer \\(${who}\\): unknown field "maxDelivery"; the fields are idempotency, name, key, .*maxDeliveries.*, ${ownOption}`,
        ),
      ),
    );
    expect(reached).toEqual([]);
  });

  it.each([
    ['key', 'x-idempotency-key', '"x-idempotency-key"'],
    ['fingerprint', true, 'true'],
    ['isPermanentError', 'ValidationError', '"ValidationError"'],
  ])('refuses %s given %o instead of a function', async (option, value, shown) => {
    // Arrange
    const { reached, start } = consumers();

    // Act
    const started = start[kind]({ [option]: value });

    // Assert
    await expect(started).rejects.toThrow(
      refusal(new RegExp(`^${option}: expected a function, got ${shown}$`)),
    );
    expect(reached).toEqual([]);
  });

  it('refuses hooks that are not functions', async () => {
    // Arrange
    const { reached, start } = consumers();

    // Act
    const notAnObject = start[kind]({ hooks: 'log' });
    const notAFunction = start[kind]({ hooks: { onDeadLetter: 'log' } });

    // Assert
    await expect(notAnObject).rejects.toThrow(
      refusal(/^hooks: expected an object of functions, got "log"$/),
    );
    await expect(notAFunction).rejects.toThrow(
      refusal(/^hooks\.onDeadLetter: expected a function, got "log"$/),
    );
    expect(reached).toEqual([]);
  });
});

describe('the RabbitMQ consumer', () => {
  it("refuses declare: 'false' (a string from a config file, which would declare the queues)", async () => {
    // Arrange
    const { reached, start } = consumers();

    // Act
    const started = start.amqp({ declare: 'false' });

    // Assert
    await expect(started).rejects.toThrow(
      refusal(/^declare: expected true or false, got "false"$/),
    );
    expect(reached).toEqual([]);
  });

  it("shows a string prefetch as one: '100' from the environment", async () => {
    // Arrange
    const { reached, start } = consumers();

    // Act
    const started = start.amqp({ prefetch: '100' });

    // Assert
    await expect(started).rejects.toThrow(
      refusal(/^prefetch: must be an integer from 1 to 65535, got "100"$/),
    );
    expect(reached).toEqual([]);
  });

  it('still takes every documented option, and null as "not given"', async () => {
    // Arrange
    const { reached, start } = consumers();

    // Act
    const consumer = await start.amqp({
      retryQueue: 'q.retry',
      deadLetterQueue: 'q.dlq',
      declare: false,
      prefetch: null,
      concurrency: 2,
      key: (m: unknown) => String(m),
      fingerprint: null,
      hooks: { onDuplicate: undefined, metrics: {} },
      drainTimeout: '100ms',
    });

    // Assert
    expect(reached).toEqual(['amqp checkQueue', 'amqp prefetch', 'amqp consume']);
    expect(consumer.consumerTag).toBe('ctag');
  });
});
