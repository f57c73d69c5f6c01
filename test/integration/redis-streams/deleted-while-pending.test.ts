/**
 * Entries deleted from the stream (`XDEL`, `XTRIM`, `XADD … MAXLEN`) while pending, against a real Redis 7,
 * whose `XAUTOCLAIM` and `XCLAIM` drop such ids from the pending list. Before, each was a message lost in
 * silence: `XAUTOCLAIM`'s deleted ids were acked with no hook, a retry's `XCLAIM` dropped the entry after
 * `onRetry` promised a redelivery, and a dead letter after a long handler's idle reset had dropped it was
 * reported as a duplicate, no letter written. Now each is reported (`onConsumerError`, operation
 * `deleted`, with the id) and recorded in the dead-letter stream, with the entry's fields when the
 * consumer still held them.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type RedisStreamsConsumerErrorEvent,
  type RedisStreamsConsumerOptions,
} from '../../../src/redis-streams/index.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer: entries deleted while pending', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups } = fixture;

  /** The dead letters of `stream`, each as a map of its fields. */
  async function letters(stream: string): Promise<Array<Map<string, string[]>>> {
    const reply = (await fixture.admin.sendCommand(['XRANGE', `${stream}:dlq`, '-', '+'])) as Array<
      [string, string[]]
    >;
    return reply.map(([, fields]) => {
      const byName = new Map<string, string[]>();
      for (let i = 0; i + 1 < fields.length; i += 2) {
        byName.set(fields[i] as string, [
          ...(byName.get(fields[i] as string) ?? []),
          fields[i + 1] as string,
        ]);
      }
      return byName;
    });
  }

  const pendingCount = async (stream: string) =>
    Number(((await fixture.admin.sendCommand(['XPENDING', stream, 'workers'])) as [number])[0]);

  /** A fresh stream with its group, and the options of a consumer on it reporting into `events`. */
  async function setUp(test: string) {
    const stream = `ik-test:streams-deleted:${test}:${run}`;
    streams.push(stream, `${stream}:dlq`);
    await fixture.admin.sendCommand(['XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM']);
    const events = {
      errors: [] as RedisStreamsConsumerErrorEvent[],
      duplicates: 0,
      deadLetters: [] as string[],
    };
    const options: RedisStreamsConsumerOptions = {
      stream,
      group: 'workers',
      name: `deleted-${test}-${run}`,
      consumer: 'live',
      idempotency: createIdempotency({ store: memoryStore() }),
      pollInterval: '10ms',
      claimInterval: '50ms',
      minIdle: '300ms',
      backoff: { initial: '10ms', max: '10ms', jitter: false },
      hooks: {
        onConsumerError: (event) => void events.errors.push(event),
        onDuplicate: () => void events.duplicates++,
        onDeadLetter: (event) => void events.deadLetters.push(event.reason),
      },
    };
    return { stream, events, options };
  }

  it('reports and records an entry XAUTOCLAIM finds deleted, instead of acking it in silence', async () => {
    // Arrange: an entry a crashed consumer read, then deleted (a MAXLEN cap, an XDEL) while pending.
    const { stream, events, options } = await setUp('reclaimed');
    const id = await fixture.addDeletedWhilePending(stream, 'pay-1');
    let handled = 0;
    // Act
    const consumer = await idempotentConsumer(
      fixture.admin,
      () => {
        handled++;
      },
      options,
    );
    cleanups.push(() => consumer.close());
    await waitUntil('the deletion to be reported', () =>
      events.errors.some((event) => event.operation === 'deleted'),
    );
    await waitUntil('its letter', async () => (await letters(stream)).length === 1);
    // Assert
    const deleted = events.errors.filter((event) => event.operation === 'deleted');
    expect(deleted).toHaveLength(1);
    expect(deleted[0]?.entryId).toBe(id);
    expect((deleted[0]?.error as Error | undefined)?.name).toBe('EntryDeletedError');
    expect(String((deleted[0]?.error as Error | undefined)?.message)).toContain(id);
    const [letter] = await letters(stream);
    expect(letter?.get('x-idempotency-dead-letter-reason')).toEqual(['deleted']);
    expect(letter?.get('x-idempotency-entry-id')).toEqual([id]);
    expect(letter?.get('x-idempotency-consumer')).toEqual([options.name]);
    expect(handled).toBe(0);
    expect(await pendingCount(stream)).toBe(0);
  });

  it('records an entry deleted before its retry with its fields, instead of waiting for a redelivery that never comes', async () => {
    // Arrange: the handler fails on an entry a MAXLEN cap trims meanwhile; deliveries are left.
    const { stream, events, options } = await setUp('retried');
    const id = String(
      await fixture.admin.sendCommand([
        'XADD',
        stream,
        '*',
        'x-idempotency-key',
        'pay-2',
        'amount',
        '100',
      ]),
    );
    let handled = 0;
    // Act
    const consumer = await idempotentConsumer(
      fixture.admin,
      async () => {
        handled++;
        await fixture.admin.sendCommand(['XDEL', stream, id]);
        throw new Error('card processor down');
      },
      { ...options, maxDeliveries: 3 },
    );
    cleanups.push(() => consumer.close());
    await waitUntil('the deletion to be reported', () =>
      events.errors.some((event) => event.operation === 'deleted'),
    );
    await waitUntil('its letter', async () => (await letters(stream)).length === 1);
    // Assert: the entry's fields went to the dead-letter stream, the only copy left.
    const deleted = events.errors.filter((event) => event.operation === 'deleted');
    expect(deleted.map((event) => event.entryId)).toEqual([id]);
    const [letter] = await letters(stream);
    expect(letter?.get('x-idempotency-key')).toEqual(['pay-2']);
    expect(letter?.get('amount')).toEqual(['100']);
    expect(letter?.get('x-idempotency-dead-letter-reason')).toEqual(['deleted']);
    expect(letter?.get('x-idempotency-entry-id')).toEqual([id]);
    expect(handled).toBe(1);
    expect(await pendingCount(stream)).toBe(0);
  });

  it('writes the dead letter of an entry deleted while a long handler ran, instead of reporting a duplicate', async () => {
    // Arrange: the handler runs past minIdle / 3 (its idle time reset meanwhile, which on a deleted entry
    // drops it from the pending list), then fails on the last allowed delivery.
    const { stream, events, options } = await setUp('dead-lettered');
    const id = String(
      await fixture.admin.sendCommand([
        'XADD',
        stream,
        '*',
        'x-idempotency-key',
        'pay-3',
        'amount',
        '250',
      ]),
    );
    // Act
    const consumer = await idempotentConsumer(
      fixture.admin,
      async () => {
        await fixture.admin.sendCommand(['XDEL', stream, id]);
        // Three idle resets (every 100 ms): one is enough.
        await new Promise((resolve) => setTimeout(resolve, 350));
        throw new Error('card declined');
      },
      { ...options, maxDeliveries: 1 },
    );
    cleanups.push(() => consumer.close());
    await waitUntil('the letter', async () => (await letters(stream)).length === 1);
    await waitUntil('its report', () => events.deadLetters.length === 1);
    // Assert
    const [letter] = await letters(stream);
    expect(letter?.get('x-idempotency-key')).toEqual(['pay-3']);
    expect(letter?.get('amount')).toEqual(['250']);
    expect(letter?.get('x-idempotency-dead-letter-reason')).toEqual(['handler_error']);
    expect(letter?.get('x-idempotency-entry-id')).toEqual([id]);
    expect(events.deadLetters).toEqual(['handler_error']);
    expect(events.duplicates).toBe(0);
    // One letter: no claim round, this consumer's or another's, took the held entry for a lost one.
    expect(await letters(stream)).toHaveLength(1);
    expect(events.errors.filter((event) => event.operation === 'deleted')).toEqual([]);
  });
  it('reports nothing for an entry deleted while its handler ran and succeeded: it was not lost', async () => {
    // Arrange: claim rounds every 50 ms, a handler running past them and past its idle resets.
    const { stream, events, options } = await setUp('executed');
    const id = String(
      await fixture.admin.sendCommand(['XADD', stream, '*', 'x-idempotency-key', 'pay-4']),
    );
    let executed = 0;
    // Act
    const consumer = await idempotentConsumer(
      fixture.admin,
      async () => {
        await fixture.admin.sendCommand(['XDEL', stream, id]);
        await new Promise((resolve) => setTimeout(resolve, 250));
      },
      { ...options, hooks: { ...options.hooks, onExecuted: () => void executed++ } },
    );
    cleanups.push(() => consumer.close());
    await waitUntil('the entry to be executed', () => executed === 1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Assert
    expect(events.errors).toEqual([]);
    expect(await letters(stream)).toEqual([]);
    expect(await pendingCount(stream)).toBe(0);
  });

  it('reports nothing when the entry a retry re-takes was settled by another consumer, then trimmed', async () => {
    // Arrange: while the handler runs, another consumer reclaims the entry, runs and acks it, and a MAXLEN
    // cap trims it; then the handler fails, with deliveries left. Before, the retry's XCLAIM found the
    // entry neither claimable nor in the stream and took it for deleted: a processed message was reported
    // lost and dead-lettered.
    const { stream, events, options } = await setUp('settled-elsewhere');
    const id = String(
      await fixture.admin.sendCommand(['XADD', stream, '*', 'x-idempotency-key', 'pay-5']),
    );
    let handled = 0;
    let retried = 0;
    // Act
    const consumer = await idempotentConsumer(
      fixture.admin,
      async () => {
        handled++;
        await fixture.admin.sendCommand(['XCLAIM', stream, 'workers', 'other', '0', id, 'JUSTID']);
        await fixture.admin.sendCommand(['XACK', stream, 'workers', id]);
        await fixture.admin.sendCommand(['XTRIM', stream, 'MAXLEN', '0']);
        throw new Error('card processor down');
      },
      { ...options, maxDeliveries: 3, hooks: { ...options.hooks, onRetry: () => void retried++ } },
    );
    cleanups.push(() => consumer.close());
    await waitUntil('the retry', () => retried === 1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Assert: nothing reported or recorded; the entry is not pending.
    expect(handled).toBe(1);
    expect(events.errors.filter((event) => event.operation === 'deleted')).toEqual([]);
    expect(await letters(stream)).toEqual([]);
    expect(await pendingCount(stream)).toBe(0);
  });
});
