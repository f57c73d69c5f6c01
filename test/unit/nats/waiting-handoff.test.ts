/**
 * `working()` for a message that waited for a slot, as it leaves the queue: the queue's touches stopped,
 * and its delivery's first one (the claim phase's, then the handler's) came a full interval after the
 * delivery started, whenever the queue had last touched it: up to two intervals between touches (three
 * with a slow claim), past an `ack_wait` under twice a legal `workingInterval`. Now the delivery's
 * touches go on from the queue's last one.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer, type NatsJsMsg } from '../../../src/nats/index.js';

// The real timer, taken before any test fakes it: steps of real I/O (the engine's, the store's) can lag
// the fake clock on a loaded machine, and only real time lets them run.
const realSetTimeout = globalThis.setTimeout;

/** A pull consumer handing out `names` in order; `working` lists each `working()` with its time. */
function fakeServer(names: string[]) {
  const working: Record<string, number[]> = {};
  const stored = names.map(
    (name, index): NatsJsMsg => ({
      subject: 'orders',
      data: new TextEncoder().encode(name),
      headers: undefined,
      seq: index + 1,
      info: { deliveryCount: 1, stream: 'ORDERS', streamSequence: index + 1 },
      ack: () => {},
      nak: () => {},
      working: () => {
        working[name] = [...(working[name] ?? []), Date.now()];
      },
      term: () => {},
    }),
  );
  // Each open pull's wait, woken when the pulls are closed.
  const waits = new Set<() => void>();
  let closed = false;
  const fetch = async (options?: { max_messages?: number }) => {
    let left = options?.max_messages ?? 1;
    return {
      async *[Symbol.asyncIterator]() {
        while (!closed) {
          const next = left > 0 ? stored.shift() : undefined;
          if (next !== undefined) {
            left--;
            yield next;
            continue;
          }
          if (left === 0) return;
          await new Promise<void>((resolve) => waits.add(resolve));
        }
      },
      close: async () => {
        closed = true;
        for (const wake of waits) wake();
      },
    };
  };
  const consumer = { fetch, info: async () => ({ config: { ack_wait: 30e9 } }) };
  return { consumer, working };
}

describe('NATS consumer: working() for a message leaving the waiting queue', () => {
  beforeEach(() => {
    vi.useFakeTimers({
      toFake: [
        'setTimeout',
        'clearTimeout',
        'setImmediate',
        'clearImmediate',
        'Date',
        'performance',
      ],
    });
    vi.setSystemTime(0);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('goes on from the queue’s last touch, an interval apart throughout', async () => {
    // Arrange: one slot; m1's handler takes 250 ms, m2's 300 ms; m2 waits for the slot meanwhile.
    const server = fakeServer(['m1', 'm2']);
    const handlerMs: Record<string, number> = { m1: 250, m2: 300 };
    const done: string[] = [];
    const running = await idempotentConsumer(
      server.consumer,
      async (_message, context) => {
        await new Promise((resolve) => setTimeout(resolve, handlerMs[context.key]));
        done.push(context.key);
      },
      {
        name: 'handoff',
        key: (message) => new TextDecoder().decode(message.data),
        // No batching: its window follows the event loop's measured load (real time), which moved the
        // claim, and so the handler's start, off the fake clock's grid on a loaded machine.
        idempotency: createIdempotency({ store: memoryStore(), batch: false }),
        concurrency: 1,
        workingInterval: 100,
      },
    );
    // Act: 700 ms of the fake clock, then more an interval at a time, with real time between, until m2's
    // handler has ended (a loaded machine ran the real steps between the timers late: m2 was still
    // running at 700 ms once, in CI).
    await vi.advanceTimersByTimeAsync(700);
    for (let round = 0; round < 50 && done.length < 2; round++) {
      await new Promise((resolve) => realSetTimeout(resolve, 10));
      await vi.advanceTimersByTimeAsync(100);
    }
    // Assert: m2 touched at 100 and 200 ms in the queue, started at 250 ms, then every 100 ms from 300 ms
    // (before: its handler's first touch at 350 ms, 150 ms after the queue's last one).
    // The count after that depends on when m2's handler ends (a step or two of real I/O under fake timers).
    expect(done).toEqual(['m1', 'm2']);
    const touches = server.working.m2 ?? [];
    expect(touches.slice(0, 4)).toEqual([100, 200, 300, 400]);
    expect(touches.every((at, index) => at === (index + 1) * 100)).toBe(true);
    const closed = running.close();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await closed).toBe(true);
  });
});
