/**
 * Claim rounds go through the reclaim script (`scripts/reclaim-1.lua`) until Redis refuses to run it (an
 * ACL user without `EVAL`, a proxy without it), then, for good, through `XAUTOCLAIM` and an `XPENDING`
 * per entry, as before the script; a reclaimed entry is handled either way.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type RedisStreamsClient,
  type RedisStreamsConsumerErrorEvent,
} from '../../../src/redis-streams/index.js';

const until = async (what: string, predicate: () => boolean) => {
  const deadline = Date.now() + 2000;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
};

describe('Redis Streams consumer: claim rounds where the reclaim script is refused', () => {
  it("falls back for good to XAUTOCLAIM when Redis refuses the script: NOPERM … 'eval'", async () => {
    // Arrange: EVAL refused; one abandoned entry to reclaim, once.
    const sent: string[] = [];
    let reclaimable = true;
    const client: RedisStreamsClient = {
      sendCommand: async (args: Array<string | Buffer>) => {
        // No script cache here: each script goes as EVAL, after its EVALSHA's NOSCRIPT (script-call.ts).
        if (String(args[0]) === 'EVALSHA')
          throw new Error('NOSCRIPT No matching script. Please use EVAL.');
        const name = String(args[0]);
        sent.push(name);
        if (name === 'EVAL') {
          throw new Error("NOPERM User worker has no permissions to run the 'eval' command");
        }
        if (name === 'XAUTOCLAIM') {
          const entries = reclaimable ? [['5-0', ['x-idempotency-key', 'abandoned']]] : [];
          reclaimable = false;
          return ['0-0', entries, []];
        }
        if (name === 'XPENDING') return [['5-0', 'me', '40000', '3']];
        if (name === 'XREADGROUP') return null;
        return 1;
      },
    };
    const counts: number[] = [];
    // Act
    const consumer = await idempotentConsumer(
      client,
      (_entry, context) => void counts.push(context.deliveryCount),
      {
        stream: 's',
        group: 'g',
        name: 'c',
        idempotency: createIdempotency({ store: memoryStore() }),
        pollInterval: '5ms',
        claimInterval: '20ms',
      },
    );
    await until('the abandoned entry to run', () => counts.length === 1);
    await until('another claim round', () => sent.filter((n) => n === 'XAUTOCLAIM').length >= 2);
    await consumer.close();
    // Assert
    expect(counts).toEqual([3]);
    expect(sent.filter((name) => name === 'EVAL')).toHaveLength(1);
  });

  it('leaves to this process a deleted entry it still handles, which XAUTOCLAIM lists as deleted', async () => {
    // Arrange: EVAL refused; the entry read is deleted while its handler runs, and every XAUTOCLAIM lists
    // it as deleted (Redis 7 drops deleted ids whatever their idle time). Before, the claim round reported
    // it lost (and dead-lettered it) though its handler went on and executed it.
    const errors: RedisStreamsConsumerErrorEvent[] = [];
    let read = false;
    let executed = 0;
    const client: RedisStreamsClient = {
      sendCommand: async (args: Array<string | Buffer>) => {
        // No script cache here: each script goes as EVAL, after its EVALSHA's NOSCRIPT (script-call.ts).
        if (String(args[0]) === 'EVALSHA')
          throw new Error('NOSCRIPT No matching script. Please use EVAL.');
        const name = String(args[0]);
        if (name === 'EVAL') {
          throw new Error("NOPERM User worker has no permissions to run the 'eval' command");
        }
        if (name === 'XAUTOCLAIM') return ['0-0', [], read ? ['5-0'] : []];
        if (name === 'XREADGROUP') {
          if (read) return null;
          read = true;
          return [['s', [['5-0', ['x-idempotency-key', 'held']]]]];
        }
        return 1;
      },
    };
    // Act
    const consumer = await idempotentConsumer(
      client,
      async () => {
        await new Promise((resolve) => setTimeout(resolve, 150));
      },
      {
        stream: 's',
        group: 'g',
        name: 'c',
        idempotency: createIdempotency({ store: memoryStore() }),
        pollInterval: '5ms',
        claimInterval: '20ms',
        hooks: {
          onConsumerError: (event) => void errors.push(event),
          onExecuted: () => void executed++,
        },
      },
    );
    await until('the entry to be executed', () => executed === 1);
    await consumer.close();
    // Assert
    expect(errors.filter((event) => event.operation === 'deleted')).toEqual([]);
  });
});
