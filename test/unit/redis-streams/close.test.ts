/**
 * `close()` of the Redis Streams consumer against a fake client whose blocking read the test answers when
 * it chooses: the read in progress counts against `drainTimeout`, and entries its reply brings after
 * `close()` gave up on it are never started (they stay pending, for `XAUTOCLAIM` to hand elsewhere).
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, type Duration, memoryStore } from '../../../src/index.js';
import { idempotentConsumer, type RedisStreamsClient } from '../../../src/redis-streams/index.js';

/** A client answering every command at once but `XREADGROUP`, whose replies wait in `reads`. */
function fakeClients() {
  const reads: Array<(reply: unknown) => void> = [];
  const sent: string[][] = [];
  const client: RedisStreamsClient = {
    sendCommand: async (args: string[]) => {
      // No script cache here: each script goes as EVAL, after its EVALSHA's NOSCRIPT (script-call.ts).
      if (String(args[0]) === 'EVALSHA')
        throw new Error('NOSCRIPT No matching script. Please use EVAL.');
      sent.push(args);
      if (args[0] === 'XAUTOCLAIM') return ['0-0', [], []];
      if (args[0] === 'XREADGROUP') return new Promise((resolve) => reads.push(resolve));
      return 'OK';
    },
  };
  return { client, reads, sent };
}

const until = async (what: string, predicate: () => boolean) => {
  const deadline = Date.now() + 2000;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
};

/** A consumer on {@link fakeClients}, waiting in its first read; `handled.count` counts handler calls. */
async function readingConsumer(drainTimeout: Duration) {
  const { client, reads, sent } = fakeClients();
  const handled = { count: 0 };
  const consumer = await idempotentConsumer(
    client,
    () => {
      handled.count++;
    },
    {
      stream: 's',
      group: 'g',
      name: 'c',
      idempotency: createIdempotency({ store: memoryStore() }),
      blockingClient: client,
      drainTimeout,
    },
  );
  await until('the first read', () => reads.length === 1);
  return { consumer, reads, handled, sent };
}

describe('Redis Streams consumer: close() and the read in progress', () => {
  it('gives up on an unanswered read at drainTimeout, then starts nothing its late reply brings', async () => {
    // Arrange
    const { consumer, reads, handled } = await readingConsumer('100ms');
    // Act
    const started = performance.now();
    const closed = await consumer.close();
    const elapsed = performance.now() - started;
    reads[0]!([['s', [['1-0', ['x-idempotency-key', 'late']]]]]);
    await consumer.done;
    await new Promise((resolve) => setTimeout(resolve, 50));
    // Assert
    expect(closed).toBe(false);
    expect(elapsed).toBeLessThan(1000);
    expect(handled.count).toBe(0);
  });

  it('hands back, never starting, the entries of a read answered after close() began, before it resolves', async () => {
    // Arrange
    const { consumer, reads, handled, sent } = await readingConsumer('2s');
    // Act
    const closing = consumer.close();
    setTimeout(() => reads[0]!([['s', [['1-0', ['x-idempotency-key', 'in-time']]]]]), 50);
    const closed = await closing;
    // Assert: a graceful shutdown starts no new work; the entry stays pending, idle for minIdle (30 s by
    // default), so XAUTOCLAIM hands it to a live consumer at its next round. (Before, it ran.)
    expect(closed).toBe(true);
    expect(handled.count).toBe(0);
    // Through the set-idle script (scripts/set-idle-1.lua), which tells an entry deleted meanwhile apart.
    expect(sent).toContainEqual([
      'EVAL',
      expect.stringContaining('set-idle-1.lua'),
      '1',
      's',
      'g',
      expect.any(String),
      '30000',
      '1-0',
    ]);
  });
});
