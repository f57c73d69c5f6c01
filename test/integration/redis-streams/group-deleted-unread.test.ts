/**
 * The consumer group destroyed (`XGROUP DESTROY`, the stream kept) while a consumer runs that has read
 * nothing itself, its peers having read the whole backlog, against a real Redis. It re-created the group
 * at `0`, and the whole stream was delivered again: entries older than the store's `retention` ran a
 * second time. Now it re-creates the group where it stood when the consumer started.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type RedisStreamsConsumerErrorEvent,
} from '../../../src/redis-streams/index.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer: the group destroyed before this consumer read anything', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups } = fixture;

  it('re-creates the group where it stood at startup, not at 0', async () => {
    // Arrange: three old entries a peer read and acked long ago; a consumer starts after that, with a
    // store that no longer has their keys (past `retention`).
    const stream = `ik-test:streams-group-unread:${run}`;
    streams.push(stream, `${stream}:dlq`);
    const { admin } = fixture;
    await admin.sendCommand(['XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM']);
    for (const order of ['old-1', 'old-2', 'old-3']) {
      await admin.sendCommand(['XADD', stream, '*', 'order', order]);
    }
    await admin.sendCommand(['XREADGROUP', 'GROUP', 'workers', 'peer', 'STREAMS', stream, '>']);
    const entries = (await admin.sendCommand(['XRANGE', stream, '-', '+'])) as Array<[string]>;
    await admin.sendCommand(['XACK', stream, 'workers', ...entries.map(([id]) => id)]);
    const blocking = admin.duplicate();
    await blocking.connect();
    cleanups.push(() => blocking.destroy());
    const seen: string[] = [];
    const errors: RedisStreamsConsumerErrorEvent[] = [];
    const consumer = await idempotentConsumer(
      admin,
      (entry) => {
        seen.push(entry.fields.order ?? '');
      },
      {
        stream,
        group: 'workers',
        name: `group-unread-${run}`,
        idempotency: createIdempotency({ store: memoryStore() }),
        blockingClient: blocking,
        block: '100ms',
        hooks: { onConsumerError: (event) => void errors.push(event) },
      },
    );
    cleanups.push(() => consumer.close());

    // Act: the group destroyed, then a new entry.
    await admin.sendCommand(['XGROUP', 'DESTROY', stream, 'workers']);
    await waitUntil('the group to be re-created', () => errors.length > 0);
    await admin.sendCommand(['XADD', stream, '*', 'order', 'new-1']);
    await waitUntil('new-1', () => seen.includes('new-1'));
    await new Promise((resolve) => setTimeout(resolve, 300));

    // Assert: only the new entry ran (before: old-1, old-2 and old-3 ran a second time).
    expect(seen).toEqual(['new-1']);
    expect(errors.filter((event) => event.operation === 'create-group')).toEqual([]);
    expect(await consumer.close()).toBe(true);
  });
});
