/**
 * How the Redis Streams consumer writes a dead letter, against a fake client: one script (`EVAL`) that
 * writes the letter and acks the entry, falling back for good to `XADD` then `XACK` when Redis refuses to
 * run the script at all (Redis Cluster `CROSSSLOT`, an ACL without `EVAL`), never when the script itself
 * failed (the letter's failure, as an `XADD`'s would be: a second way of writing could write it twice).
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer, type RedisStreamsClient } from '../../../src/redis-streams/index.js';

/** A client with `entries` to read, one per read, whose `EVAL` fails with `evalError` (if given). */
function fakeClient(entries: string[], evalError?: string) {
  const sent: string[] = [];
  const client: RedisStreamsClient = {
    sendCommand: async (args: Array<string | Buffer>) => {
      // No script cache here: each script goes as EVAL, after its EVALSHA's NOSCRIPT (script-call.ts).
      if (String(args[0]) === 'EVALSHA')
        throw new Error('NOSCRIPT No matching script. Please use EVAL.');
      const name = String(args[0]);
      // A claim round (the reclaim script): nothing to claim, and not a letter's command.
      if (name === 'EVAL' && String(args[1]).includes('reclaim-1.lua')) return ['0-0', [], [], []];
      // An idle time set (the set-idle script, a retry's or a touch's): nothing deleted, not a letter's.
      if (name === 'EVAL' && String(args[1]).includes('set-idle-1.lua')) return [];
      sent.push(name);
      if (name === 'XAUTOCLAIM') return ['0-0', [], []];
      // The fallback's look at the entry before its letter (as the script checks): still pending.
      if (name === 'XPENDING') return [[String(args[3]), 'c', 0, 1]];
      if (name === 'XREADGROUP') {
        const key = entries.shift();
        return key === undefined
          ? null
          : [['s', [[`${sent.length}-0`, ['x-idempotency-key', key]]]]];
      }
      if (name === 'EVAL' && evalError !== undefined) throw new Error(evalError);
      return name === 'EVAL' || name === 'XACK' ? 1 : 'OK';
    },
  };
  return { client, sent };
}

const until = async (what: string, predicate: () => boolean) => {
  const deadline = Date.now() + 2000;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
};

/** Dead-letters two entries (a handler that always fails, `maxDeliveries` 1); the commands sent. */
async function twoLetters(evalError?: string) {
  const { client, sent } = fakeClient(['a', 'b'], evalError);
  const settled: string[] = [];
  const consumer = await idempotentConsumer(
    client,
    () => {
      throw new Error('boom');
    },
    {
      stream: 's',
      group: 'g',
      name: 'c',
      idempotency: createIdempotency({ store: memoryStore() }),
      maxDeliveries: 1,
      concurrency: 1,
      pollInterval: '5ms',
      hooks: {
        onDeadLetter: () => void settled.push('letter'),
        onBrokerError: (event) => void settled.push(`error:${event.operation}`),
      },
    },
  );
  await until('both letters to settle', () => settled.length === 2);
  await consumer.close();
  const letters = sent.filter((name) => ['EVAL', 'XADD', 'XACK'].includes(name));
  return { letters, settled };
}

describe('Redis Streams consumer: the dead-letter script', () => {
  it('writes each letter and its ack as one script', async () => {
    // Act
    const { letters, settled } = await twoLetters();
    // Assert
    expect(letters).toEqual(['EVAL', 'EVAL']);
    expect(settled).toEqual(['letter', 'letter']);
  });

  it.each([
    ["CROSSSLOT Keys in request don't hash to the same slot"],
    ["NOPERM this user has no permissions to run the 'eval' command"],
    ["ERR unknown command 'EVAL', with args beginning with: "],
    // Redis 6.2 (and proxies that copy its wording) quote the name in backticks.
    ['ERR unknown command `EVAL`, with args beginning with: `--[[`, '],
  ])('falls back for good to XADD then XACK when Redis refuses the script: %s', async (refusal) => {
    // Act
    const { letters, settled } = await twoLetters(refusal);
    // Assert: tried once, then two commands for every letter.
    expect(letters).toEqual(['EVAL', 'XADD', 'XACK', 'XADD', 'XACK']);
    expect(settled).toEqual(['letter', 'letter']);
  });

  it('takes a failure inside the script as the letter’s failure, never writing it a second way', async () => {
    // Act
    const { letters, settled } = await twoLetters(
      'WRONGTYPE Operation against a key holding the wrong kind of value script: 1a2b, on @user_script:19.',
    );
    // Assert
    expect(letters).toEqual(['EVAL', 'EVAL']);
    expect(settled).toEqual(['error:dead_letter', 'error:dead_letter']);
  });
});
