/**
 * The dead letter of an entry deleted while its handler ran (its idle reset found it gone, so no redelivery
 * can come) whose write fails only after the settle gave up on it (`brokerTimeout`), against a fake client.
 * Before, that failure went nowhere: the settle had reported a timeout (`onBrokerError`) and moved on, and
 * the message was lost with no letter. Now it is recorded as a deleted entry's letter (`onConsumerError`,
 * operation `deleted`), as a write failing in time is, through the settle's retry. Only without the
 * scripts (an ACL denying `EVAL`): the set-idle script leaves such an entry pending, for its letter's
 * script to write and ack (or a claim round to record); Redis 7's `XCLAIM` drops it.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type RedisStreamsClient,
  type RedisStreamsConsumerErrorEvent,
} from '../../../src/redis-streams/index.js';

const until = async (what: string, predicate: () => boolean) => {
  const deadline = Date.now() + 3000;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
};

describe('Redis Streams consumer: a deleted entry’s letter failing after brokerTimeout', () => {
  it('records the entry as deleted when its letter’s write fails late, instead of losing it', async () => {
    // Arrange: one entry; every idle reset finds it deleted while pending; the first XADD fails after
    // 300 ms, past a brokerTimeout of 100 ms; later ones succeed.
    const letters: string[][] = [];
    let read = false;
    let xadds = 0;
    // Pending until an XCLAIM drops it (Redis 7 drops a deleted id it meets).
    let dropped = false;
    const client: RedisStreamsClient = {
      sendCommand: async (args: Array<string | Buffer>) => {
        const text = args.map(String);
        // Scripts refused: claim rounds go as XAUTOCLAIM (nothing to claim here), idle resets as XCLAIM.
        if (text[0] === 'EVALSHA' || text[0] === 'EVAL') {
          throw new Error(
            `NOPERM User c has no permissions to run the '${text[0].toLowerCase()}' command`,
          );
        }
        if (text[0] === 'XAUTOCLAIM') return ['0-0', [], []];
        if (text[0] === 'XPENDING') return dropped ? [] : [['1-0', 'c', 0, 1]];
        // XCLAIM drops the entry deleted while pending (Redis 7), and XRANGE finds it gone.
        if (text[0] === 'XCLAIM') {
          dropped = true;
          return [];
        }
        if (text[0] === 'XRANGE') return [];
        if (text[0] === 'XREADGROUP') {
          if (read) return null;
          read = true;
          return [['s', [['1-0', ['x-idempotency-key', 'pay-late']]]]];
        }
        if (text[0] === 'XADD') {
          xadds++;
          if (xadds === 1) {
            await new Promise((resolve) => setTimeout(resolve, 300));
            throw new Error('READONLY You can’t write against a read only replica.');
          }
          letters.push(text);
          return '2-0';
        }
        return 'OK';
      },
    };
    const errors: RedisStreamsConsumerErrorEvent[] = [];
    const brokerErrors: string[] = [];
    const consumer = await idempotentConsumer(
      client,
      async () => {
        // Past an idle reset (every minIdle / 3 = 100 ms): it finds the entry deleted.
        await new Promise((resolve) => setTimeout(resolve, 150));
        throw new Error('card declined');
      },
      {
        stream: 's',
        group: 'g',
        name: 'c',
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries: 1,
        minIdle: '300ms',
        brokerTimeout: '100ms',
        pollInterval: '5ms',
        hooks: {
          onConsumerError: (event) => void errors.push(event),
          onBrokerError: (event) => void brokerErrors.push(event.operation),
        },
      },
    );
    // Act
    await until('the late letter', () => letters.length === 1);
    await consumer.close();
    // Assert: the timeout was reported, then the entry recorded with its fields, as deleted.
    expect(brokerErrors).toEqual(['dead_letter']);
    expect(errors.map((event) => [event.operation, event.entryId])).toEqual([['deleted', '1-0']]);
    const letter = letters[0] ?? [];
    expect(letter).toContain('pay-late');
    expect(letter[letter.indexOf('x-idempotency-dead-letter-reason') + 1]).toBe('deleted');
  });
});
