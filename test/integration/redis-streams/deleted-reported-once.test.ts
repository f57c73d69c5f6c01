/**
 * An entry deleted while pending, found by the claim rounds of two consumers at once, against a real
 * Redis 7: one letter is written (the dead-letter script writes only while the id is pending), and now
 * one report goes to `onConsumerError` (operation `deleted`), from the consumer whose script wrote it.
 * Before, each consumer reported the entry before its script ran: two reports of one lost entry.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type RedisStreamsClient,
  type RedisStreamsConsumerErrorEvent,
} from '../../../src/redis-streams/index.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer: a deleted entry found by two consumers at once', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups } = fixture;

  it('reports it once, from the consumer that wrote its letter', async () => {
    // Arrange: an entry a crashed consumer read, then deleted while pending.
    const stream = `ik-test:streams-deleted-once:${run}:${process.pid}`;
    streams.push(stream, `${stream}:dlq`);
    await fixture.admin.sendCommand(['XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM']);
    const id = await fixture.addDeletedWhilePending(stream, 'pay-deleted-once');
    // Each consumer's dead-letter script (the only script with two keys) waits for the other's: both
    // claim rounds have found the id deleted, and pending, before either records it.
    let arrived = 0;
    let bothArrived = () => {};
    const both = new Promise<void>((resolve) => {
      bothArrived = resolve;
    });
    const gated: RedisStreamsClient = {
      sendCommand: async (args: Array<string | Buffer>, options?: object) => {
        const name = String(args[0]);
        if ((name === 'EVALSHA' || name === 'EVAL') && String(args[2]) === '2') {
          if (++arrived === 2) bothArrived();
          await both;
        }
        return fixture.admin.sendCommand(args, options);
      },
    };
    const errors: RedisStreamsConsumerErrorEvent[] = [];
    let handled = 0;
    for (const consumer of ['first', 'second']) {
      const started = await idempotentConsumer(
        gated,
        () => {
          handled++;
        },
        {
          stream,
          group: 'workers',
          name: `deleted-once-${run}`,
          consumer,
          idempotency: createIdempotency({ store: memoryStore() }),
          minIdle: '100ms',
          claimInterval: '20ms',
          pollInterval: '10ms',
          hooks: { onConsumerError: (event) => void errors.push(event) },
        },
      );
      cleanups.push(() => started.close());
    }

    // Act
    await waitUntil('both rounds', () => arrived >= 2, 5_000);
    const pending = async () =>
      Number(((await fixture.admin.sendCommand(['XPENDING', stream, 'workers'])) as [number])[0]);
    await waitUntil('the id acked', async () => (await pending()) === 0, 5_000);
    await new Promise((resolve) => setTimeout(resolve, 200));

    // Assert: one letter, one report (before: two reports).
    const letters = (await fixture.admin.sendCommand([
      'XRANGE',
      `${stream}:dlq`,
      '-',
      '+',
    ])) as Array<[string, string[]]>;
    expect(
      letters.map(([, fields]) => fields[fields.indexOf('x-idempotency-entry-id') + 1]),
    ).toEqual([id]);
    expect(errors.map((event) => [event.operation, event.entryId, String(event.error)])).toEqual([
      ['deleted', id, expect.stringContaining('EntryDeletedError')],
    ]);
    expect(handled).toBe(0);
  });
});
