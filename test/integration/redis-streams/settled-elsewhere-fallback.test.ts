/**
 * An entry settled by another consumer (acked) and then trimmed, while this consumer still held a delivery
 * of it, against a real Redis 7: nothing to report, with the scripts or without them. The scripts
 * (scripts/set-idle-1.lua, scripts/dead-letter-2.lua) find the id no longer pending and do nothing. Where
 * Redis refuses them (an ACL user without `@scripting`), the retry's or idle reset's `XCLAIM` claimed
 * nothing and the `XRANGE` after it found no entry: the id was taken for deleted while pending, reported
 * (`onConsumerError`, `deleted`) and recorded as a letter of reason `deleted`; and a dead letter was written
 * by `XADD` (then `XACK`) whatever the id's state, reported to `onDeadLetter`. Now the fallback asks
 * `XPENDING` first, as the scripts do: an id no longer pending was settled elsewhere, and a letter for it
 * is not written (reported as a duplicate, as the script's `0` is).
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type RedisStreamsConsumerErrorEvent,
} from '../../../src/redis-streams/index.js';
import { type ScriptsMode, streamsFixture } from '../../helpers/streams-fixture.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer: an entry settled elsewhere, then trimmed, is not deleted', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups } = fixture;

  /** The reasons of the letters of `stream`, in order. */
  const letters = (stream: string) =>
    fixture.letterField(stream, 'x-idempotency-dead-letter-reason');

  it.each<[ScriptsMode, string, number, number]>([
    // The handler fails with deliveries left: its retry re-owns the entry (set-idle).
    ['without scripts', 'retry', 3, 0],
    ['with scripts', 'retry', 3, 0],
    // The handler fails on its last delivery: the dead letter.
    ['without scripts', 'dead letter', 1, 0],
    ['with scripts', 'dead letter', 1, 0],
    // The same, after an idle reset (every minIdle / 3 = 100 ms) met the settled id.
    ['without scripts', 'dead letter after a reset', 1, 250],
    ['with scripts', 'dead letter after a reset', 1, 250],
  ])('%s: a %s reports nothing', async (mode, what, maxDeliveries, waitMs) => {
    // Arrange: a consumer whose handler sees its entry acked by another consumer and trimmed, then fails.
    const name = `${mode}-${what}`.replaceAll(' ', '-');
    const stream = `ik-test:streams-settled-elsewhere:${name}:${run}`;
    streams.push(stream, `${stream}:dlq`);
    const client = await fixture.clientFor(mode, `ik-test-noeval-${name}-${run}`);
    const errors: RedisStreamsConsumerErrorEvent[] = [];
    const events: string[] = [];
    let handled = 0;
    const consumer = await idempotentConsumer(
      client,
      async (entry) => {
        handled++;
        // Another consumer's delivery settled it (acked), and a MAXLEN trim removed it since.
        await fixture.admin.sendCommand(['XACK', stream, 'workers', entry.id]);
        await fixture.admin.sendCommand(['XDEL', stream, entry.id]);
        await new Promise((resolve) => setTimeout(resolve, waitMs));
        throw new Error('card declined');
      },
      {
        stream,
        group: 'workers',
        name: `settled-elsewhere-${name}-${run}`,
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries,
        minIdle: '300ms',
        claimInterval: '50ms',
        pollInterval: '10ms',
        hooks: {
          onConsumerError: (event) => void errors.push(event),
          onRetry: () => void events.push('retry'),
          onDeadLetter: () => void events.push('dead-letter'),
          onDuplicate: () => void events.push('duplicate'),
        },
      },
    );
    cleanups.push(() => consumer.close());

    // Act
    await fixture.add(stream, `pay-settled-${name}`);
    await waitUntil('the delivery settled', () => events.length > 0, 5_000);
    await new Promise((resolve) => setTimeout(resolve, 400));

    // Assert: no letter, no `deleted` report (before, without the scripts: a letter of reason `deleted`
    // and its report, or a letter of the handler's error reported to onDeadLetter); the dead letter a
    // duplicate, as the script's.
    expect(await consumer.close()).toBe(true);
    expect(await letters(stream)).toEqual([]);
    expect(errors.map((event) => event.operation)).toEqual([]);
    expect(handled).toBe(1);
    expect(events).toEqual([maxDeliveries === 1 ? 'duplicate' : 'retry']);
  });
});
