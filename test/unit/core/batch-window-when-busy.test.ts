/**
 * `batch.windowWhenBusy` (the store's `capabilities.batchWindowWhenBusy`): the memory store answers every
 * call synchronously, so a tick-sized window never forms a batch of HTTP requests; while the event loop is
 * busy it gathers a whole turn's calls instead, and an idle loop keeps the tick (and its latency).
 */
import { describe, expect, it } from 'vitest';
import {
  createIdempotency,
  isInvalidOptionsError,
  memoryStore,
  type Store,
} from '../../../src/index.js';
import type { BatchingOptions } from '../../../src/store/batching.js';
import { busyEventLoop, idleEventLoop } from '../../helpers/event-loop.js';

/**
 * Two runs started by two timers of one turn of the event loop (two ticks), on a memory store, with the
 * loop busy or idle before: how many store calls carried their claims.
 */
async function claimCalls(loop: 'busy' | 'idle', batch?: BatchingOptions): Promise<number> {
  const inner = memoryStore();
  let calls = 0;
  const store: Store = {
    ...inner,
    claim: (key, options) => {
      calls++;
      return inner.claim(key, options);
    },
    claimMany: (requests) => {
      calls++;
      return inner.claimMany(requests);
    },
    completeAndClaimMany: (completes, claims) => {
      if (claims.length > 0) calls++;
      return inner.completeAndClaimMany(completes, claims);
    },
  };
  const idempotency = createIdempotency({ store, ...(batch === undefined ? {} : { batch }) });
  if (loop === 'idle') await idleEventLoop();
  const runs = await new Promise<unknown[]>((resolve) => {
    const started: Array<Promise<unknown>> = [];
    // Two timers due together run in one timers phase, each in a tick of its own.
    setTimeout(() => {
      // Made busy here, right before the first claim reads the gauge: made busy before the timer, a
      // machine that left this process waiting in the poll phase for a sample's length (a loaded CI)
      // measured that wait as idle, and the window was a tick (2 calls).
      if (loop === 'busy') busyEventLoop();
      started.push(idempotency.run({ key: 'a', payload: 1 }, async () => 'a'));
    });
    setTimeout(() => {
      started.push(idempotency.run({ key: 'b', payload: 2 }, async () => 'b'));
      resolve(Promise.all(started));
    });
  });
  expect(runs).toMatchObject([{ status: 'executed' }, { status: 'executed' }]);
  return calls;
}

describe("the memory store's batch window", () => {
  it('gathers the claims of one turn while the event loop is busy', async () => {
    expect(await claimCalls('busy')).toBe(1);
  });

  it('sends each tick’s claims at its end while the event loop is idle', async () => {
    expect(await claimCalls('idle')).toBe(2);
  });

  it("keeps the tick under load when asked for windowWhenBusy: 'tick'", async () => {
    expect(await claimCalls('busy', { windowWhenBusy: 'tick' })).toBe(2);
  });

  it('refuses a windowWhenBusy that is neither tick nor turn', () => {
    const bad = { windowWhenBusy: 'poll' } as unknown as BatchingOptions;
    let caught: unknown;
    try {
      createIdempotency({ store: memoryStore(), batch: bad });
    } catch (error) {
      caught = error;
    }
    expect(isInvalidOptionsError(caught)).toBe(true);
    expect(String(caught)).toContain("batch.windowWhenBusy must be 'tick' or 'turn'");
  });
});
