/**
 * `close()` is the end of `onConsumerError` reports, against a fake client. A claim round finds an entry
 * deleted while pending, and the script writing its letter hangs: `close()` gives up on the loop at
 * `drainTimeout` and resolves `false`. Before, the reports still owed then came afterwards, at
 * `brokerTimeout`: the entry reported `deleted` (the report no longer waits for the hung write) and the
 * loop's command reported `read` (`BrokerTimeoutError`), to an application that had closed the consumer.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type RedisStreamsClient,
  type RedisStreamsConsumerErrorEvent,
} from '../../../src/redis-streams/index.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer: close() and the reports still owed', () => {
  it('reports nothing after close() resolved, though a deleted entry’s letter was still being written', async () => {
    // Arrange: the first claim round (the reclaim script, one key) finds entry 1-0 deleted while pending;
    // the dead-letter script (two keys) never answers.
    let letterSent = false;
    const client: RedisStreamsClient = {
      sendCommand: async (args: Array<string | Buffer>) => {
        const text = args.map(String);
        if (text[0] === 'EVALSHA' && text[2] === '1') {
          return letterSent ? ['0-0', [], [], []] : ['0-0', [], ['1-0'], []];
        }
        if (text[0] === 'EVALSHA' && text[2] === '2') {
          letterSent = true;
          return new Promise(() => {});
        }
        if (text[0] === 'XREADGROUP') return null;
        return 'OK';
      },
    };
    const errors: RedisStreamsConsumerErrorEvent[] = [];
    let closed = false;
    const late: RedisStreamsConsumerErrorEvent[] = [];
    const consumer = await idempotentConsumer(client, () => {}, {
      stream: 's',
      group: 'g',
      name: 'c',
      idempotency: createIdempotency({ store: memoryStore() }),
      brokerTimeout: '200ms',
      drainTimeout: '50ms',
      pollInterval: '5ms',
      hooks: {
        onConsumerError: (event) => {
          errors.push(event);
          if (closed) late.push(event);
        },
      },
    });
    await waitUntil('the letter to be sent', () => letterSent, 2000);

    // Act: close while the letter hangs, then wait past brokerTimeout.
    const result = await consumer.close();
    closed = true;
    await new Promise((resolve) => setTimeout(resolve, 400));

    // Assert: close() gave up on the loop, and nothing was reported after it resolved.
    expect(result).toBe(false);
    expect(late.map((event) => event.operation)).toEqual([]);
    expect(errors).toEqual([]);
  });
});
