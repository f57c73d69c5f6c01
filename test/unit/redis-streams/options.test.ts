/**
 * Options of the Redis Streams consumer refused before any command is sent: a dead-letter stream that is
 * the consumed stream (each dead letter would be read back, fail and be dead-lettered again), and a
 * `minIdle` so small that live consumers' entries are reclaimed between two idle resets.
 */
import { describe, expect, it } from 'vitest';
import {
  createIdempotency,
  type Duration,
  InvalidOptionsError,
  memoryStore,
} from '../../../src/index.js';
import {
  idempotentConsumer,
  MIN_IDLE_FLOOR_MS,
  type RedisStreamsClient,
  type RedisStreamsConsumerOptions,
} from '../../../src/redis-streams/index.js';

/** A client recording commands; a read answers nothing. */
function fakeClient() {
  const sent: string[][] = [];
  const client: RedisStreamsClient = {
    sendCommand: async (args) => {
      sent.push(args.map(String));
      if (args[0] === 'XAUTOCLAIM') return ['0-0', [], []];
      if (args[0] === 'XREADGROUP') return null;
      return 'OK';
    },
  };
  return { client, sent };
}

const base = (): RedisStreamsConsumerOptions => ({
  stream: 'orders',
  group: 'g',
  name: 'c',
  idempotency: createIdempotency({ store: memoryStore() }),
  pollInterval: '10ms',
});

describe('Redis Streams consumer options', () => {
  it('refuses a dead-letter stream that is the consumed stream, before sending anything', async () => {
    // Arrange
    const { client, sent } = fakeClient();
    // Act
    const started = idempotentConsumer(client, () => {}, {
      ...base(),
      deadLetterStream: 'orders',
    });
    // Assert
    await expect(started).rejects.toThrow(InvalidOptionsError);
    await expect(started).rejects.toThrow(/deadLetterStream/);
    expect(sent).toEqual([]);
  });

  it('refuses a minIdle below the floor', async () => {
    // Arrange
    const { client, sent } = fakeClient();
    // Act
    const started = idempotentConsumer(client, () => {}, { ...base(), minIdle: 1 });
    // Assert
    await expect(started).rejects.toThrow(InvalidOptionsError);
    await expect(started).rejects.toThrow(/minIdle: must be at least 100ms, got 1ms/);
    expect(sent).toEqual([]);
  });

  it.each([
    ['30d', '"30d"'],
    [2 ** 31, String(2 ** 31)],
  ])(
    'refuses a pollInterval of %o, longer than a timer can wait (the stream would be read in a loop)',
    async (pollInterval, shown) => {
      // Arrange
      const { client, sent } = fakeClient();
      // Act
      const started = idempotentConsumer(client, () => {}, {
        ...base(),
        pollInterval: pollInterval as Duration,
      });
      // Assert
      await expect(started).rejects.toThrow(
        `pollInterval: expected a positive number of ms (at most 2147483647 ms) or a duration like '500ms' or '30s', got ${shown}`,
      );
      expect(sent).toEqual([]);
    },
  );

  it('accepts a minIdle at the floor and another dead-letter stream', async () => {
    // Arrange
    const { client } = fakeClient();
    // Act
    const consumer = await idempotentConsumer(client, () => {}, {
      ...base(),
      minIdle: MIN_IDLE_FLOOR_MS,
      deadLetterStream: 'orders:failed',
    });
    // Assert
    expect(await consumer.close()).toBe(true);
  });

  it.each([
    [{ deadLetterStream: 5 }, /^deadLetterStream: expected a string, got 5$/],
    [{ deadLetterStream: '' }, /^deadLetterStream: must be a stream name, got ""$/],
    [{ deadLetterMaxLen: 0 }, /^deadLetterMaxLen: must be a positive integer, got 0$/],
    [{ deadLetterMaxLen: -1 }, /^deadLetterMaxLen: must be a positive integer, got -1$/],
    [{ deadLetterMaxLen: 1.5 }, /^deadLetterMaxLen: must be a positive integer, got 1\.5$/],
    [{ deadLetterMaxLen: Number.NaN }, /^deadLetterMaxLen: must be a positive integer, got NaN$/],
    [{ deadLetterMaxLen: '1000' }, /^deadLetterMaxLen: must be a positive integer, got "1000"$/],
    [{ stream: 5 }, /^stream: expected a string, got 5$/],
    [{ group: ['g'] }, /^group: expected a string, got \["g"\]$/],
    [{ consumer: 7 }, /^consumer: expected a string, got 7$/],
    [
      { hooks: { onConsumerError: 'log' } },
      /^hooks.onConsumerError: expected a function, got "log"$/,
    ],
  ])('refuses %o before sending anything', async (bad, message) => {
    // Arrange
    const { client, sent } = fakeClient();
    // Act
    const started = idempotentConsumer(client, () => {}, {
      ...base(),
      ...(bad as object),
    } as RedisStreamsConsumerOptions);
    // Assert
    await expect(started).rejects.toThrow(
      expect.objectContaining({ code: 'invalid_options', message: expect.stringMatching(message) }),
    );
    expect(sent).toEqual([]);
  });

  it('takes null as not given: the default dead-letter stream, consumer name and polling reads', async () => {
    // Arrange
    const { client, sent } = fakeClient();
    // Act
    const consumer = await idempotentConsumer(client, () => {}, {
      ...base(),
      deadLetterStream: null as never,
      deadLetterMaxLen: null as never,
      consumer: null as never,
      blockingClient: null as never,
      hooks: null as never,
    });
    await new Promise((resolve) => setTimeout(resolve, 30));
    // Assert: the group was created and `client` polled (no BLOCK, since there is no blocking client).
    expect(await consumer.close()).toBe(true);
    expect(consumer.consumer).toMatch(/^c-/);
    const reads = sent.filter((args) => args[0] === 'XREADGROUP');
    expect(reads.length).toBeGreaterThan(0);
    expect(reads.every((args) => !args.includes('BLOCK'))).toBe(true);
  });
});
