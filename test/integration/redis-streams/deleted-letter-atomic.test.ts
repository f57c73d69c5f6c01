/**
 * An entry deleted while pending leaves the pending list only together with its letter, against a real
 * Redis 7. Before, the id left it first: the claim round's `XCLAIM` (reclaim script) dropped it, or the
 * set-idle script acked it, and the letter's `XADD` came after, as a second command. A letter that failed
 * then (here the dead-letter key holds a string: `WRONGTYPE`; a failover or a dropped connection does the
 * same), or a process that died before it, lost the entry with no record: nothing pending was left to
 * find it again. Now the scripts leave the id pending, and one script writes the letter and acks it
 * (scripts/dead-letter-2.lua): a letter that fails leaves it pending, and a later claim round records it.
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

describe('Redis Streams consumer: a deleted entry’s letter and its ack as one step', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups } = fixture;

  /** The `x-idempotency-entry-id` and reason of each letter of `stream`. */
  const letters = async (stream: string) =>
    (
      (await fixture.admin.sendCommand(['XRANGE', `${stream}:dlq`, '-', '+'])) as Array<
        [string, string[]]
      >
    ).map(([, fields]) => [
      fields[fields.indexOf('x-idempotency-entry-id') + 1],
      fields[fields.indexOf('x-idempotency-dead-letter-reason') + 1],
    ]);

  const pendingCount = async (stream: string) =>
    Number(((await fixture.admin.sendCommand(['XPENDING', stream, 'workers'])) as [number])[0]);

  /** A stream whose dead-letter key holds a string, so that every letter fails (`WRONGTYPE`). */
  async function setUp(test: string) {
    const stream = `ik-test:streams-deleted-atomic:${test}:${run}:${process.pid}`;
    streams.push(stream, `${stream}:dlq`);
    await fixture.admin.sendCommand(['XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM']);
    await fixture.admin.sendCommand(['SET', `${stream}:dlq`, 'not a stream']);
    const errors: RedisStreamsConsumerErrorEvent[] = [];
    const options: RedisStreamsConsumerOptions = {
      stream,
      group: 'workers',
      name: `deleted-atomic-${test}-${run}`,
      consumer: 'live',
      idempotency: createIdempotency({ store: memoryStore() }),
      pollInterval: '10ms',
      claimInterval: '50ms',
      minIdle: '300ms',
      backoff: { initial: '10ms', max: '10ms', jitter: false },
      hooks: { onConsumerError: (event) => void errors.push(event) },
    };
    // The record's failure: reported as `deleted` too, with the WRONGTYPE error.
    const letterFailed = () =>
      errors.some(
        (event) => event.operation === 'deleted' && String(event.error).includes('WRONGTYPE'),
      );
    return { stream, errors, options, letterFailed };
  }

  it('records at a later round an entry a claim round found deleted whose letter failed, instead of losing it', async () => {
    // Arrange: an entry a crashed consumer read, then deleted while pending; its letter fails at first.
    const { stream, options, letterFailed } = await setUp('reclaimed');
    const id = await fixture.addDeletedWhilePending(stream, 'pay-atomic-1');
    let handled = 0;
    const consumer = await idempotentConsumer(
      fixture.admin,
      () => {
        handled++;
      },
      options,
    );
    cleanups.push(() => consumer.close());
    await waitUntil('the failed letter', letterFailed);

    // Act: the dead-letter stream works again.
    await fixture.admin.sendCommand(['DEL', `${stream}:dlq`]);

    // Assert: recorded once, then acked (before: the id was gone from the pending list, never recorded).
    await waitUntil('its letter', async () => (await letters(stream)).length > 0, 5_000);
    await waitUntil('the id acked', async () => (await pendingCount(stream)) === 0);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await letters(stream)).toEqual([[id, 'deleted']]);
    expect(handled).toBe(0);
  });

  it('records at a later round an entry a retry found deleted whose letter failed, instead of losing it', async () => {
    // Arrange: the handler fails on an entry trimmed meanwhile; the letter recording it fails at first.
    const { stream, options, letterFailed } = await setUp('retried');
    const id = String(await fixture.add(stream, 'pay-atomic-2'));
    let handled = 0;
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
    await waitUntil('the failed letter', letterFailed);

    // Act
    await fixture.admin.sendCommand(['DEL', `${stream}:dlq`]);

    // Assert: recorded once (by a claim round: the fields went with the failed write), then acked.
    // (Before: the set-idle script had acked the id before the letter, so nothing was left to record.)
    await waitUntil('its letter', async () => (await letters(stream)).length > 0, 5_000);
    await waitUntil('the id acked', async () => (await pendingCount(stream)) === 0);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await letters(stream)).toEqual([[id, 'deleted']]);
    expect(handled).toBe(1);
  });
});
