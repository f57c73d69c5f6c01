/**
 * `close()` resolving is the end of every hook call, against a fake client: a handler still running when
 * `close()` gives up on the drain and resolves `false` fails afterwards, on the last allowed delivery, and
 * its entry is dead-lettered (the letter script runs: the work goes on). Before, `onDeadLetter` then fired
 * behind the `close()` that had resolved, to an application that had closed the consumer.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer, type RedisStreamsClient } from '../../../src/redis-streams/index.js';
import { heldFailingHandler, recordingHooks } from '../../helpers/close-hooks.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer: close() and the hooks of work still running', () => {
  it('calls no hook after close() resolved false, though the entry is dead-lettered afterwards', async () => {
    // Arrange: one entry read (`pay-1`), no entry to reclaim; the letter script (two keys) answers 1, written.
    let reads = 0;
    const letters: string[] = [];
    const client: RedisStreamsClient = {
      sendCommand: async (args: Array<string | Buffer>) => {
        const text = args.map(String);
        if (text[0] === 'EVALSHA' && text[2] === '1') return ['0-0', [], [], []];
        if (text[0] === 'EVALSHA' && text[2] === '2') {
          letters.push(text[6] ?? '');
          return 1;
        }
        if (text[0] === 'XREADGROUP') {
          reads++;
          return reads === 1 ? [['s', [['1-0', ['x-idempotency-key', 'pay-1']]]]] : null;
        }
        return 'OK';
      },
    };
    const held = heldFailingHandler();
    const hooks: string[] = [];
    const consumer = await idempotentConsumer(client, held.handler, {
      stream: 's',
      group: 'g',
      name: 'c',
      idempotency: createIdempotency({ store: memoryStore() }),
      maxDeliveries: 1,
      drainTimeout: '50ms',
      pollInterval: '5ms',
      hooks: recordingHooks(hooks),
    });
    await waitUntil('the handler to start', held.started, 2000);

    // Act: close() gives up on the running handler; then the handler fails.
    const closed = await consumer.close();
    hooks.push('closed');
    held.release();
    await waitUntil('the letter to be written', () => letters.length === 1, 2000);
    await new Promise((resolve) => setTimeout(resolve, 50));

    // Assert: the letter was written and acked by the script, and no hook was called for it.
    expect(closed).toBe(false);
    expect(letters).toEqual(['1-0']);
    expect(hooks).toEqual(['closed']);
  });
});
