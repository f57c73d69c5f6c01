/**
 * An entry settled by another consumer (acked), trimmed since or not, while this consumer still held a
 * delivery of it, against a real Redis 7. The scripts (scripts/set-idle-1.lua, scripts/dead-letter-2.lua)
 * find the id no longer pending and do nothing, trimmed or not. Where Redis refuses them (an ACL user
 * without `@scripting`), an id no longer pending whose entry is still in the stream was settled elsewhere
 * too: nothing reported, and a letter for it is not written (reported as a duplicate, as the script's `0`
 * is). (Before, the two-command dead letter was written whatever the id's state, reported to
 * `onDeadLetter`.)
 *
 * Without the scripts, an id no longer pending whose entry is gone is taken for deleted while held (another
 * process's `XAUTOCLAIM` drops such an id and records it without its fields: see
 * deleted-while-held-fallback.test.ts), and recorded with its fields. So an entry acked elsewhere AND
 * trimmed while held gets a letter there, a deliberate trade-off (docs/consumers/redis-streams.md): a
 * redundant letter can be cleaned up, a payload lost cannot be replayed. The scripts still tell the two.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type RedisStreamsConsumerErrorEvent,
} from '../../../src/redis-streams/index.js';
import { type ScriptsMode, streamsFixture } from '../../helpers/streams-fixture.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer: an entry settled elsewhere while held', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups } = fixture;

  /**
   * A consumer (`mode`) whose handler sees its entry acked by another consumer (and trimmed: `trim`), waits
   * `waitMs` and fails, `maxDeliveries` allowed: what it reported and recorded, once closed.
   */
  const settleElsewhere = async (
    mode: ScriptsMode,
    name: string,
    maxDeliveries: number,
    waitMs: number,
    trim: boolean,
  ) => {
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
        // Another consumer's delivery settled it (acked), and a MAXLEN trim removed it since, or not.
        await fixture.admin.sendCommand(['XACK', stream, 'workers', entry.id]);
        if (trim) await fixture.admin.sendCommand(['XDEL', stream, entry.id]);
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
    await fixture.add(stream, `pay-settled-${name}`);
    await waitUntil('the delivery settled', () => events.length > 0, 5_000);
    await new Promise((resolve) => setTimeout(resolve, 400));
    return {
      closed: await consumer.close(),
      reasons: await fixture.letterField(stream, 'x-idempotency-dead-letter-reason'),
      keys: await fixture.letterField(stream, 'x-idempotency-key'),
      reported: errors.map((event) => event.operation),
      events,
      handled,
    };
  };

  it.each<[ScriptsMode, string, string, number, number]>([
    // The handler fails with deliveries left: its retry re-owns the entry (set-idle).
    ['without scripts', 'acked, still there', 'retry', 3, 0],
    ['with scripts', 'acked and trimmed', 'retry', 3, 0],
    // The handler fails on its last delivery: the dead letter.
    ['without scripts', 'acked, still there', 'dead letter', 1, 0],
    ['with scripts', 'acked and trimmed', 'dead letter', 1, 0],
    // The same, after an idle reset (every minIdle / 3 = 100 ms) met the settled id.
    ['without scripts', 'acked, still there', 'dead letter after a reset', 1, 250],
    ['with scripts', 'acked and trimmed', 'dead letter after a reset', 1, 250],
  ])('%s, %s: a %s reports nothing', async (mode, state, what, maxDeliveries, waitMs) => {
    // Arrange, act: the entry acked by another consumer (and trimmed) while the handler ran, then it fails.
    const trim = state === 'acked and trimmed';
    const name = `${mode}-${what}${trim ? '-trimmed' : ''}`.replaceAll(' ', '-');
    const settled = await settleElsewhere(mode, name, maxDeliveries, waitMs, trim);

    // Assert: no letter, no `deleted` report (before, without the scripts: a letter of the handler's error
    // reported to onDeadLetter); the dead letter a duplicate, as the script's.
    expect(settled.closed).toBe(true);
    expect(settled.reasons).toEqual([]);
    expect(settled.reported).toEqual([]);
    expect(settled.handled).toBe(1);
    expect(settled.events).toEqual([maxDeliveries === 1 ? 'duplicate' : 'retry']);
  });

  it.each<[string, number, number, string, string[]]>([
    ['retry', 3, 0, 'deleted', ['deleted']],
    ['dead letter', 1, 0, 'handler_error', []],
    ['dead letter after a reset', 1, 250, 'handler_error', []],
  ])(
    'without scripts, acked elsewhere AND trimmed: a %s records it with its fields',
    async (what, maxDeliveries, waitMs, reason, reported) => {
      // Arrange, act: as above, without the scripts, the entry acked and trimmed. The deliberate
      // trade-off: it cannot be told from an entry deleted while held whose id another process's
      // XAUTOCLAIM dropped, whose payload only this process holds (deleted-while-held-fallback.test.ts).
      const name = `trade-off-${what}`.replaceAll(' ', '-');
      const settled = await settleElsewhere('without scripts', name, maxDeliveries, waitMs, true);

      // Assert: one letter, with the entry's fields (its key), as before b049980.
      expect(settled.closed).toBe(true);
      expect(settled.reasons).toEqual([reason]);
      expect(settled.keys).toEqual([`pay-settled-${name}`]);
      expect(settled.reported).toEqual(reported);
      expect(settled.handled).toBe(1);
      expect(settled.events).toEqual([maxDeliveries === 1 ? 'dead-letter' : 'retry']);
    },
  );
});
