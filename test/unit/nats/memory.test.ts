/**
 * The NATS consumer's heap over a long run: nothing may be kept per message while the consumer runs. Waiting
 * for a slot by racing a promise that settles only at `close()` left a reaction on that promise for every
 * message, tens of megabytes per million messages, freed only by `close()`.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer, type NatsJsMsg } from '../../../src/nats/index.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** A pull consumer whose messages the test pushes; it counts acks and naks. */
function fakeConsumer() {
  const queue: NatsJsMsg[] = [];
  let wake: (() => void) | undefined;
  const state = { settled: 0 };
  const message = (seq: number): NatsJsMsg => ({
    subject: 'orders',
    data: new Uint8Array(0),
    headers: undefined,
    seq,
    info: { deliveryCount: 1, stream: 'ORDERS', streamSequence: seq },
    ack: () => void state.settled++,
    nak: () => void state.settled++,
    working: () => {},
    term: () => {},
  });
  // One pull: waits for a message, then yields what is queued, up to max_messages (a pull that expires
  // as soon as the queue is empty).
  const fetch = async (options?: { max_messages?: number }) => {
    let closed = false;
    return {
      async *[Symbol.asyncIterator]() {
        let left = options?.max_messages ?? 1;
        while (!closed && queue.length === 0)
          await new Promise<void>((resolve) => (wake = resolve));
        while (!closed && left > 0) {
          const next = queue.shift();
          if (next === undefined) return;
          left--;
          yield next;
        }
      },
      close: async () => {
        closed = true;
        wake?.();
      },
    };
  };
  const consumer = {
    fetch,
    info: async () => ({ config: { ack_wait: 30e9 } }),
  };
  let seq = 0;
  const push = (count: number) => {
    for (let i = 0; i < count; i++) queue.push(message(++seq));
    wake?.();
  };
  return { consumer, push, state };
}

async function until(predicate: () => boolean) {
  const deadline = Date.now() + 30_000;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

describe('NATS consumer: memory over a long run', () => {
  it('keeps nothing per message while it runs', { timeout: 60_000 }, async () => {
    // Arrange: every message a duplicate of one key, so the store keeps one record whatever the count.
    const { consumer, push, state } = fakeConsumer();
    const running = await idempotentConsumer(consumer, () => {}, {
      name: 'memory',
      key: () => 'one-key',
      idempotency: createIdempotency({ store: memoryStore() }),
      concurrency: 10,
    });
    push(5_000);
    await until(() => state.settled === 5_000);
    const before = heapAfterGc();
    // Act
    push(50_000);
    await until(() => state.settled === 55_000);
    const grown = heapAfterGc() - before;
    await running.close();
    // Assert: under 50 bytes per message (the race's leftover reaction kept ~310 bytes per message).
    expect(grown).toBeLessThan(50_000 * 50);
  });
});
