/**
 * A handler that asks for a lease longer than the engine's (`ctx.extendLease('2s')` with `leaseMs` 300 ms),
 * lets one heartbeat beat, then blocks the event loop (a long synchronous step, during which no heartbeat
 * runs) past 500 ms from its request and past a default lease from the beat; then another process's engine
 * tries the same key. The heartbeat used to cut the lease back to 300 ms from the beat, and the other
 * process took the key over while the handler still ran.
 */
import { createIdempotency, type RunOutcome, type Store } from '../../src/index.js';

/** What the scenario saw. */
export interface RequestedLeaseRun {
  /**
   * `Date.now()` just before `extendLease('2s')`, plus 2 s: no later than the end the holder counts on (the
   * engine counts from its ask).
   */
  requestedEnd: number;
  /** The record's `leaseUntil` once `extendLease('2s')` resolved (the store's clock). */
  leaseUntilAsked: number;
  /** The record's `leaseUntil` once a heartbeat had been answered after that. */
  leaseUntilAfterBeat: number;
  /** The other process's `run` of the same key, after the blocked step. */
  otherOutcome: RunOutcome<string> | undefined;
  /** The holder's `run` outcome, or what it rejected with. */
  holderOutcome: unknown;
}

/** Run code until `untilEpochMs` without yielding, as a long synchronous step does. */
function blockEventLoop(untilEpochMs: number): void {
  while (Date.now() < untilEpochMs) {
    // busy on purpose
  }
}

/**
 * Run the scenario: `holderStore` and `otherStore` are two stores (two processes' clients) on the same
 * records. `holderStore.extend` is counted, to know when a heartbeat has been answered.
 */
export async function runPastDefaultLease(
  holderStore: Store,
  otherStore: Store,
  key: string,
): Promise<RequestedLeaseRun> {
  let extensions = 0;
  const extend = holderStore.extend.bind(holderStore);
  holderStore.extend = async (...args) => {
    const held = await extend(...args);
    extensions++;
    return held;
  };
  const leaseUntil = async (storageKey: string) => {
    const record = await holderStore.get(storageKey);
    return record?.status === 'in_progress' ? record.leaseUntil : 0;
  };
  const holder = createIdempotency({ store: holderStore, leaseMs: '300ms' });
  const other = createIdempotency({ store: otherStore, leaseMs: '300ms' });
  const seen: RequestedLeaseRun = {
    requestedEnd: 0,
    leaseUntilAsked: 0,
    leaseUntilAfterBeat: 0,
    otherOutcome: undefined,
    holderOutcome: undefined,
  };
  seen.holderOutcome = await holder
    .run({ key }, async (ctx) => {
      const asked = Date.now();
      seen.requestedEnd = asked + 2000;
      await ctx.extendLease('2s');
      seen.leaseUntilAsked = await leaseUntil(ctx.storageKey);
      // Wait for one heartbeat to have been answered (they come every 100 to 150 ms).
      const before = extensions;
      while (extensions === before) await new Promise((resolve) => setTimeout(resolve, 5));
      const beaten = Date.now();
      seen.leaseUntilAfterBeat = await leaseUntil(ctx.storageKey);
      blockEventLoop(Math.max(asked + 500, beaten + 400));
      seen.otherOutcome = await other.run({ key }, () => 'second execution');
      return 'first execution';
    })
    .catch((error: unknown) => error);
  return seen;
}
