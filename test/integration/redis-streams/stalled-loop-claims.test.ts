/**
 * An event loop stalled longer than `minIdle` (another entry's handler doing synchronous work), against a
 * real Redis: the idle resets of an entry still being handled could not be sent meanwhile, and once the
 * loop ran again this process's own claim round could reach Redis before the overdue reset. It took the
 * entry it was handling, counted a delivery and started a second one, which met the key in progress and
 * retried: the healthy entry's delivery count climbed, and a failing handler was dead-lettered before
 * `maxDeliveries` real failures. Now a claim round leaves the entries this process holds to it; without
 * the scripts, `XAUTOCLAIM` still takes such an entry, but no second delivery starts, and the delivery it
 * counted is recorded as handed back, not counted against `maxDeliveries`. The same with two consumer
 * instances on the stream and group in one process (one event loop): each one's rounds took the other's
 * live entries, until the entries they hold were shared by the process (live-entries.ts).
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/redis-streams/index.js';
import { type ScriptsMode, streamsFixture } from '../../helpers/streams-fixture.js';
import { waitUntil } from '../../helpers/wait-until.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Run code for `ms` without yielding: the event loop is stalled all that time. */
function spin(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy on purpose
  }
}

describe('Redis Streams consumer: an event loop stalled longer than minIdle', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups } = fixture;

  /** The highest delivery count `XPENDING` gives entry `id` of `stream`, sampled until `until` holds. */
  async function highestCount(stream: string, id: string, until: () => boolean): Promise<number> {
    let highest = 0;
    await waitUntil(
      'the entry to settle',
      async () => {
        const pending = (await fixture.admin.sendCommand([
          'XPENDING',
          stream,
          'workers',
          id,
          id,
          '1',
        ])) as unknown[][];
        for (const item of pending) highest = Math.max(highest, Number(item[3]));
        return until();
      },
      20_000,
      20,
    );
    return highest;
  }

  /**
   * Consume `stream` with a free slot left for claim rounds (polling: the loop's pause ends with the stall,
   * and its claim round may go out before the overdue reset). Entry `slow` runs `slow(deliveryCount)`;
   * any other entry stalls the event loop five times for 200 ms (minIdle 100 ms). `instance` names the
   * consumer in the group; the instances of one test share `store`.
   */
  async function stallingConsumer(
    mode: ScriptsMode,
    stream: string,
    slow: (deliveryCount: number) => Promise<void>,
    seen: { retries: string[]; deadLetters: string[]; executed: string[] },
    instance = 'live',
    store = memoryStore(),
  ) {
    // Once per stream: a second instance finds the group there.
    await fixture.admin
      .sendCommand(['XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM'])
      .catch((error: unknown) => {
        if (!String(error).includes('BUSYGROUP')) throw error;
      });
    const client = await fixture.clientFor(
      mode,
      `ik-test-noeval-${stream.replaceAll(':', '-')}-${instance}`,
    );
    const consumer = await idempotentConsumer(
      client,
      async (entry, context) => {
        if (entry.fields['x-idempotency-key']?.startsWith('slow-'))
          return slow(context.deliveryCount);
        // Five stalls: which comes first after one, the loop's claim round or the overdue reset, depends
        // on where their timers stood; before, any one of them that let the round go first was enough.
        for (let stall = 0; stall < 5; stall++) {
          await sleep(30);
          spin(200);
        }
      },
      {
        stream,
        group: 'workers',
        name: `stalled-loop-${run}`,
        consumer: instance,
        idempotency: createIdempotency({ store }),
        concurrency: 3,
        pollInterval: '10ms',
        claimInterval: '20ms',
        minIdle: '100ms',
        maxDeliveries: 3,
        backoff: { initial: '50ms', factor: 1, jitter: false },
        hooks: {
          onRetry: (event) => void seen.retries.push(event.reason),
          onDeadLetter: (event) => void seen.deadLetters.push(event.reason),
          onExecuted: (event) =>
            void seen.executed.push(String(event.message.fields['x-idempotency-key'])),
        },
      },
    );
    cleanups.push(() => consumer.close());
    return consumer;
  }

  const modes: Array<[ScriptsMode]> = [['with scripts'], ['without scripts']];
  const slug = (mode: ScriptsMode) => mode.replaceAll(' ', '-');

  it.each(modes)(
    'leaves a healthy entry it handles to its delivery, %s: run once',
    async (mode) => {
      // Arrange: the slow entry's handler runs 1.5 s; the other entry stalls the loop while it runs.
      const stream = `ik-test:streams-stalled-loop-healthy-${slug(mode)}:${run}`;
      streams.push(stream, `${stream}:dlq`);
      const runs: number[] = [];
      const seen = {
        retries: [] as string[],
        deadLetters: [] as string[],
        executed: [] as string[],
      };
      const consumer = await stallingConsumer(
        mode,
        stream,
        async (deliveryCount) => {
          runs.push(deliveryCount);
          await sleep(1500);
        },
        seen,
      );

      // Act
      const id = String(await fixture.add(stream, `slow-healthy-${run}`));
      await fixture.add(stream, `stall-healthy-${run}`);
      const highest = await highestCount(stream, id, () => seen.executed.length === 2);

      // Assert: one delivery, never taken by this process's own claim round (before: a second delivery
      // counted 2, retried as in progress). Without the scripts, XAUTOCLAIM may have counted one more.
      expect(runs).toEqual([1]);
      if (mode === 'with scripts') expect(highest).toBe(1);
      expect(seen.retries).toEqual([]);
      expect(seen.deadLetters).toEqual([]);
      expect(await fixture.pendingCount(stream)).toBe(0);
      expect(await consumer.close()).toBe(true);
    },
  );

  it.each(modes)('gives a failing handler its maxDeliveries, %s', async (mode) => {
    // Arrange: the slow entry fails on its first two runs (each 1.5 s, the loop stalled during the first)
    // and succeeds on its third; maxDeliveries 3.
    const stream = `ik-test:streams-stalled-loop-failing-${slug(mode)}:${run}`;
    streams.push(stream, `${stream}:dlq`);
    const runs: number[] = [];
    const seen = { retries: [] as string[], deadLetters: [] as string[], executed: [] as string[] };
    const consumer = await stallingConsumer(
      mode,
      stream,
      async (deliveryCount) => {
        runs.push(deliveryCount);
        await sleep(1500);
        if (runs.length < 3) throw new Error('gateway timeout');
      },
      seen,
    );

    // Act
    const id = String(await fixture.add(stream, `slow-failing-${run}`));
    await fixture.add(stream, `stall-failing-${run}`);
    await highestCount(stream, id, () => seen.executed.length + seen.deadLetters.length === 2);

    // Assert: three runs, counted 1, 2, 3 with the scripts (before: the second counted 3, and was
    // dead-lettered). Without them, the delivery XAUTOCLAIM counted is not held against the entry.
    expect(runs).toHaveLength(3);
    if (mode === 'with scripts') expect(runs).toEqual([1, 2, 3]);
    expect(seen.retries).toEqual(['handler_error', 'handler_error']);
    expect(seen.deadLetters).toEqual([]);
    expect(seen.executed).toHaveLength(2);
    expect(await fixture.letterField(stream, 'x-idempotency-dead-letter-reason')).toEqual([]);
    expect(await fixture.pendingCount(stream)).toBe(0);
    expect(await consumer.close()).toBe(true);
  });

  describe('two consumer instances on the stream and group, in one process', () => {
    /** Instances `live-a` and `live-b` of {@link stallingConsumer}, sharing one store. */
    async function twoInstances(
      mode: ScriptsMode,
      stream: string,
      slow: (deliveryCount: number) => Promise<void>,
      seen: { retries: string[]; deadLetters: string[]; executed: string[] },
    ) {
      const store = memoryStore();
      const a = await stallingConsumer(mode, stream, slow, seen, 'live-a', store);
      const b = await stallingConsumer(mode, stream, slow, seen, 'live-b', store);
      return [a, b];
    }

    it.each(modes)(
      'leaves a healthy entry one instance handles to its delivery, %s: run once',
      async (mode) => {
        // Arrange: as above, two instances reading the stream.
        const stream = `ik-test:streams-stalled-loop-two-healthy-${slug(mode)}:${run}`;
        streams.push(stream, `${stream}:dlq`);
        const runs: number[] = [];
        const seen = {
          retries: [] as string[],
          deadLetters: [] as string[],
          executed: [] as string[],
        };
        const consumers = await twoInstances(
          mode,
          stream,
          async (deliveryCount) => {
            runs.push(deliveryCount);
            await sleep(1500);
          },
          seen,
        );

        // Act
        const id = String(await fixture.add(stream, `slow-two-healthy-${run}`));
        await fixture.add(stream, `stall-two-healthy-${run}`);
        const highest = await highestCount(stream, id, () => seen.executed.length === 2);

        // Assert: before, the other instance's round took the entry (counted 2), and its delivery met
        // the key in progress and retried, again and again while the first ran.
        expect(runs).toEqual([1]);
        if (mode === 'with scripts') expect(highest).toBe(1);
        expect(seen.retries).toEqual([]);
        expect(seen.deadLetters).toEqual([]);
        expect(await fixture.pendingCount(stream)).toBe(0);
        for (const consumer of consumers) expect(await consumer.close()).toBe(true);
      },
    );

    it.each(modes)('gives a failing handler its maxDeliveries, %s', async (mode) => {
      // Arrange: as above, two instances reading the stream.
      const stream = `ik-test:streams-stalled-loop-two-failing-${slug(mode)}:${run}`;
      streams.push(stream, `${stream}:dlq`);
      const runs: number[] = [];
      const seen = {
        retries: [] as string[],
        deadLetters: [] as string[],
        executed: [] as string[],
      };
      const consumers = await twoInstances(
        mode,
        stream,
        async (deliveryCount) => {
          runs.push(deliveryCount);
          await sleep(1500);
          if (runs.length < 3) throw new Error('gateway timeout');
        },
        seen,
      );

      // Act
      const id = String(await fixture.add(stream, `slow-two-failing-${run}`));
      await fixture.add(stream, `stall-two-failing-${run}`);
      await highestCount(stream, id, () => seen.executed.length + seen.deadLetters.length === 2);

      // Assert: before, dead-lettered after two real runs, the other instance's in-progress deliveries
      // having counted the rest.
      expect(runs).toHaveLength(3);
      if (mode === 'with scripts') expect(runs).toEqual([1, 2, 3]);
      expect(seen.retries).toEqual(['handler_error', 'handler_error']);
      expect(seen.deadLetters).toEqual([]);
      expect(seen.executed).toHaveLength(2);
      expect(await fixture.letterField(stream, 'x-idempotency-dead-letter-reason')).toEqual([]);
      expect(await fixture.pendingCount(stream)).toBe(0);
      for (const consumer of consumers) expect(await consumer.close()).toBe(true);
    });

    it('leaves an entry deleted under another instance to its holder (no letter for a healthy entry)', async () => {
      // Arrange: with the scripts, two instances (minIdle 3 s, claim rounds every 20 ms). The handler, in
      // whichever instance reads the entry, makes it look idle for 10 s (its resets reaching Redis late,
      // as after a stall) and deletes it from the stream, then ends well.
      const stream = `ik-test:streams-stalled-loop-two-deleted:${run}`;
      streams.push(stream, `${stream}:dlq`);
      await fixture.admin.sendCommand(['XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM']);
      const store = memoryStore();
      const executed: string[] = [];
      const deletedReports: string[] = [];
      const instance = async (name: string) => {
        const client = await fixture.clientFor('with scripts', `ik-test-del-${name}`);
        const consumer = await idempotentConsumer(
          client,
          async (entry) => {
            await fixture.admin.sendCommand([
              'XCLAIM',
              stream,
              'workers',
              name,
              '0',
              entry.id,
              'IDLE',
              '10000',
            ]);
            await fixture.admin.sendCommand(['XDEL', stream, entry.id]);
            await sleep(400);
          },
          {
            stream,
            group: 'workers',
            name: `stalled-loop-${run}`,
            consumer: name,
            idempotency: createIdempotency({ store }),
            pollInterval: '10ms',
            claimInterval: '20ms',
            minIdle: '3s',
            hooks: {
              onExecuted: (event) =>
                void executed.push(String(event.message.fields['x-idempotency-key'])),
              onConsumerError: (event) => {
                if (event.operation === 'deleted') deletedReports.push(name);
              },
            },
          },
        );
        cleanups.push(() => consumer.close());
        return consumer;
      };
      const consumers = [await instance('del-a'), await instance('del-b')];

      // Act
      await fixture.add(stream, `deleted-two-${run}`);
      await waitUntil('the entry to settle', async () => executed.length === 1, 20_000, 20);
      await sleep(300);

      // Assert: before, the other instance's round recorded the entry as deleted (a letter without its
      // fields) and acked it under its live holder.
      expect(executed).toEqual([`deleted-two-${run}`]);
      expect(await fixture.letterField(stream, 'x-idempotency-dead-letter-reason')).toEqual([]);
      expect(deletedReports).toEqual([]);
      expect(await fixture.pendingCount(stream)).toBe(0);
      for (const consumer of consumers) expect(await consumer.close()).toBe(true);
    });
  });
});
