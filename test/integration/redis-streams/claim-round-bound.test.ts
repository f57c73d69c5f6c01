/**
 * A claim round's cost is bounded by what it may claim, not by the pending list's length, against a real
 * Redis 7. The reclaim script used `XPENDING … IDLE`, which skips the ids not idle enough without a bound:
 * over a long pending list held by live consumers (50,000 ids: about 4 ms of Redis time, measured), every
 * round of every consumer walked all of it. Now a round looks at ten ids per entry it may claim (at least
 * 100, at most 1,000), as `XAUTOCLAIM` does, and the next round goes on from there.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/redis-streams/index.js';
import { reclaim } from '../../../src/redis-streams/scripts.gen.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer: claim rounds over a long pending list', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups } = fixture;

  /** A stream whose group has `held` entries pending on a live consumer, then one abandoned long ago. */
  async function setUp(test: string, held: number) {
    const stream = `ik-test:streams-claim-bound:${test}:${run}`;
    streams.push(stream, `${stream}:dlq`);
    const send = (args: string[]) => fixture.admin.sendCommand(args);
    await send(['XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM']);
    for (let i = 0; i < held; i++)
      await send(['XADD', stream, '*', 'x-idempotency-key', `held-${i}`]);
    await send(['XREADGROUP', 'GROUP', 'workers', 'live', 'STREAMS', stream, '>']);
    const abandoned = String(await send(['XADD', stream, '*', 'x-idempotency-key', 'abandoned']));
    await send(['XREADGROUP', 'GROUP', 'workers', 'crashed', 'STREAMS', stream, '>']);
    // Abandoned for a minute; the held entries stay idle for 0 ms (their holder resets them).
    await send(['XCLAIM', stream, 'workers', 'crashed', '0', abandoned, 'IDLE', '60000', 'JUSTID']);
    return { stream, abandoned, send };
  }

  it('looks at a bounded number of pending ids per round, going on from there at the next', async () => {
    // Arrange: 300 held entries, none idle enough.
    const { stream, send } = await setUp('script', 300);
    const round = async (cursor: string) =>
      (await send([
        'EVAL',
        reclaim.source,
        '1',
        stream,
        'workers',
        'me',
        '30000',
        cursor,
        '10',
        '100',
      ])) as unknown as [string, unknown[]];
    // Act
    const first = await round('0-0');
    // Assert: 100 ids looked at, nothing claimed, and the cursor after the 100th. (Before, one round
    // walked all 301 and answered '0-0'.)
    const ids = (await send(['XRANGE', stream, '-', '+', 'COUNT', '100'])) as unknown as Array<
      [string]
    >;
    expect(first[0]).toBe(`(${ids[99]?.[0]}`);
    expect(first[1]).toEqual([]);
  });

  it('still reclaims an abandoned entry behind many held ones, over several rounds', async () => {
    // Arrange
    const { stream, abandoned } = await setUp('consumer', 300);
    const handled: string[] = [];
    // Act
    const consumer = await idempotentConsumer(
      fixture.admin,
      (entry) => {
        handled.push(entry.id);
      },
      {
        stream,
        group: 'workers',
        name: `claim-bound-${run}`,
        consumer: 'me',
        idempotency: createIdempotency({ store: memoryStore() }),
        concurrency: 1,
        minIdle: '30s',
        pollInterval: '10ms',
        claimInterval: '50ms',
      },
    );
    cleanups.push(() => consumer.close());
    await waitUntil('the abandoned entry to be handled', () => handled.includes(abandoned));
    // Assert: only the abandoned entry was taken; the held ones were left to their holder.
    expect(handled).toEqual([abandoned]);
  });
});
