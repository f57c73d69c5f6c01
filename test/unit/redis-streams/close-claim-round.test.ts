/**
 * `close()` of the Redis Streams consumer while a claim round is in progress, against a fake client whose
 * claim the test answers when it chooses: entries the round brings after `close()` began are handed back
 * (left pending, idle for `minIdle`, for a live consumer to reclaim at its next round), never started.
 * (Before, they ran behind the graceful shutdown.)
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer, type RedisStreamsClient } from '../../../src/redis-streams/index.js';

const ENTRY = ['7-0', ['x-idempotency-key', 'reclaimed']];

/** A client whose first claim round (the reclaim script, or `XAUTOCLAIM`) waits in `claims`. */
function fakeClient() {
  const claims: Array<() => void> = [];
  const sent: string[][] = [];
  const client: RedisStreamsClient = {
    sendCommand: async (args: Array<string | Buffer>) => {
      // No script cache here: each script goes as EVAL, after its EVALSHA's NOSCRIPT (script-call.ts).
      if (String(args[0]) === 'EVALSHA')
        throw new Error('NOSCRIPT No matching script. Please use EVAL.');
      const text = args.map(String);
      sent.push(text);
      const isScriptedClaim = text[0] === 'EVAL' && text[1]?.includes('reclaim-1.lua');
      if (isScriptedClaim || text[0] === 'XAUTOCLAIM') {
        if (claims.length > 0) return isScriptedClaim ? ['0-0', [], [], []] : ['0-0', [], []];
        return new Promise((resolve) =>
          claims.push(() =>
            resolve(isScriptedClaim ? ['0-0', [ENTRY], [], [2]] : ['0-0', [ENTRY], []]),
          ),
        );
      }
      if (text[0] === 'XPENDING') return [['7-0', 'other', '40000', '2']];
      if (text[0] === 'XREADGROUP') return null;
      return 'OK';
    },
  };
  return { client, claims, sent };
}

const until = async (what: string, predicate: () => boolean) => {
  const deadline = Date.now() + 2000;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
};

describe('Redis Streams consumer: close() and the claim round in progress', () => {
  it('hands back, never starting, the entries a claim round brings after close() began', async () => {
    // Arrange: a consumer waiting for its first claim round's answer.
    const { client, claims, sent } = fakeClient();
    let handled = 0;
    const consumer = await idempotentConsumer(
      client,
      () => {
        handled++;
      },
      {
        stream: 's',
        group: 'g',
        name: 'c',
        consumer: 'closing',
        idempotency: createIdempotency({ store: memoryStore() }),
        minIdle: '40s',
        drainTimeout: '2s',
      },
    );
    await until('the claim round', () => claims.length === 1);
    // Act
    const closing = consumer.close();
    claims[0]?.();
    const closed = await closing;
    await new Promise((resolve) => setTimeout(resolve, 50));
    // Assert
    expect(closed).toBe(true);
    expect(handled).toBe(0);
    // Through the set-idle script (scripts/set-idle-1.lua), which tells an entry deleted meanwhile apart.
    expect(sent).toContainEqual([
      'EVAL',
      expect.stringContaining('set-idle-1.lua'),
      '1',
      's',
      'g',
      'closing',
      '40000',
      '7-0',
    ]);
  });
});
