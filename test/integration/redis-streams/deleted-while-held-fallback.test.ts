/**
 * An entry deleted from the stream while one process holds it, whose id another process's claim round
 * drops, against a real Redis 7 with an ACL user denied `EVAL` (the consumer's path without scripts).
 * Without the reclaim script, the other process's `XAUTOCLAIM` drops a deleted id whatever its idle time
 * and records it without its fields (it never read them). The holder's handler then fails: its retry's
 * idle reset, or its dead letter, finds the id no longer pending. It took that for "settled elsewhere" and
 * did nothing (the dead letter reported as a duplicate): the fieldless letter was the only record, and the
 * failed message's payload was lost for good. Now an id no longer pending whose entry is gone is taken for
 * deleted while held, and the holder records it with its fields.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type RedisStreamsConsumerErrorEvent,
  type RedisStreamsConsumerOptions,
} from '../../../src/redis-streams/index.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { otherProcessConsumer } from '../../helpers/streams-other-process.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer without scripts: an entry deleted while held, dropped elsewhere', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups } = fixture;

  /** The letters of `stream`, each as its field names and values (absent fields stay absent). */
  const letters = async (stream: string) =>
    (
      (await fixture.admin.sendCommand(['XRANGE', `${stream}:dlq`, '-', '+'])) as Array<
        [string, string[]]
      >
    ).map(([, fields]) => {
      const byName = new Map<string, string>();
      for (let index = 0; index < fields.length; index += 2) {
        byName.set(String(fields[index]), String(fields[index + 1]));
      }
      return byName;
    });

  it.each<[string, number, string, string]>([
    // The handler fails with deliveries left: its retry's idle reset meets the dropped id.
    ['retry', 3, 'deleted', 'retry'],
    // The handler fails on its last delivery: the dead letter meets it.
    ['dead letter', 1, 'handler_error', 'dead-letter'],
  ])('a %s records the entry with its fields', async (what, maxDeliveries, reason, event) => {
    // Arrange: consumer A holds the entry; its handler waits for the entry to be deleted and for
    // consumer B's claim round to drop its id, then fails.
    const name = what.replaceAll(' ', '-');
    const stream = `ik-test:streams-deleted-held:${name}:${run}`;
    streams.push(stream, `${stream}:dlq`);
    const key = `pay-held-${name}-${run}`;
    const errors: Array<[string, RedisStreamsConsumerErrorEvent]> = [];
    const events: string[] = [];
    let started = false;
    let dropped = false;
    const options = (consumer: string): RedisStreamsConsumerOptions => ({
      stream,
      group: 'workers',
      name: `deleted-held-${name}-${consumer}-${run}`,
      idempotency: createIdempotency({ store: memoryStore() }),
      maxDeliveries,
      pollInterval: '10ms',
      hooks: {
        onConsumerError: (error) => void errors.push([consumer, error]),
        onRetry: () => void events.push(`${consumer}:retry`),
        onDeadLetter: () => void events.push(`${consumer}:dead-letter`),
        onDuplicate: () => void events.push(`${consumer}:duplicate`),
      },
    });
    // A: no idle reset (minIdle / 3) nor claim round of its own while the handler runs, so that only B's
    // claim round can find the deletion first, as in the review's scenario.
    const a = await idempotentConsumer(
      await fixture.userWithoutScripts(`ik-test-noeval-held-a-${name}-${run}`),
      async () => {
        started = true;
        await waitUntil("B's claim round to drop the id", () => dropped, 5_000);
        throw new Error('card declined');
      },
      { ...options('a'), minIdle: '30s', claimInterval: '1h' },
    );
    cleanups.push(() => a.close());
    const id = String(await fixture.add(stream, key));
    await waitUntil("A's handler to start", () => started, 5_000);
    // A trim removes the entry while A holds it (pending).
    await fixture.admin.sendCommand(['XDEL', stream, id]);
    // B stands in for a consumer of another process: one of this process leaves A's live entry to A.
    const otherProcess = await otherProcessConsumer();
    const b = await otherProcess(
      await fixture.userWithoutScripts(`ik-test-noeval-held-b-${name}-${run}`),
      async () => {
        throw new Error('B never runs the entry');
      },
      { ...options('b'), minIdle: '300ms', claimInterval: '20ms' },
    );
    cleanups.push(() => b.close());

    // Act: B's XAUTOCLAIM drops the id (its fieldless letter), then A's handler fails.
    await waitUntil(
      'the id dropped',
      async () => (await fixture.pendingCount(stream)) === 0,
      5_000,
    );
    await waitUntil("B's letter", async () => (await letters(stream)).length > 0, 5_000);
    dropped = true;
    await waitUntil("A's settle", () => events.some((name) => name.startsWith('a:')), 5_000);

    // Assert: besides B's letter without fields, A's with them (before: none, its dead letter reported as
    // a duplicate, and the payload lost).
    expect(await a.close()).toBe(true);
    expect(await b.close()).toBe(true);
    expect(events).toEqual([`a:${event}`]);
    const written = await letters(stream);
    expect(written.map((letter) => letter.get('x-idempotency-entry-id'))).toEqual([id, id]);
    expect(written.map((letter) => letter.get('x-idempotency-key'))).toEqual([undefined, key]);
    expect(written.map((letter) => letter.get('x-idempotency-dead-letter-reason'))).toEqual([
      'deleted',
      reason,
    ]);
    expect(errors.map(([consumer, error]) => `${consumer}:${error.operation}`)).toEqual(
      reason === 'deleted' ? ['b:deleted', 'a:deleted'] : ['b:deleted'],
    );
  });
});
