/**
 * The lease this process counts on starts when the claim (or the extension) is *asked for*, not when its
 * reply comes back: the store starts it when it runs the call, somewhere in between. Counted from the
 * reply, a reply that waited (a batch queue, a slow link, a Redis `WAIT` for replicas) made the holder
 * believe in a lease the store had already ended, and a step started its effect while another process
 * could take the key over. And extensions run one after another, so the last reply is the last call.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createIdempotency, LeaseLostError, memoryStore, type Store } from '../../../src/index.js';

afterEach(() => {
  vi.useRealTimers();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A memory store on the fake clock whose chosen calls run at once and answer `replyMs` later. */
function slowReplies(calls: { claim?: boolean; extend?: boolean }, replyMs: number): Store {
  const inner = memoryStore({ clock: { now: () => Date.now() } });
  const late = async <T>(answer: Promise<T>): Promise<T> => {
    const value = await answer;
    await sleep(replyMs);
    return value;
  };
  return {
    ...inner,
    capabilities: { ...inner.capabilities, batch: false },
    claim: calls.claim ? (key, options) => late(inner.claim(key, options)) : inner.claim,
    extend: calls.extend
      ? (key, token, leaseMs) => late(inner.extend(key, token, leaseMs))
      : inner.extend,
  };
}

describe('the lease as the holder counts it', () => {
  it('starts when the claim was asked for, so a step after the store’s lease ended is refused', async () => {
    // Arrange: a 500 ms lease whose claim reply takes 300 ms; no heartbeat, so the lease is the claim's.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const store = slowReplies({ claim: true }, 300);
    const clock = { now: () => Date.now() };
    const options = { store, clock, leaseMs: 500, batch: false, extendLease: false } as const;
    const holder = createIdempotency(options);
    const other = createIdempotency(options);
    const charges: string[] = [];
    // Act: the handler starts at 300 ms and reaches its step at 600 ms, 100 ms after the store's lease
    // ended; another process asks for the key at 550 ms.
    const held = holder.run({ key: 'order-1' }, async (ctx) => {
      await sleep(300);
      await ctx.step('charge', async () => {
        charges.push('holder');
      });
      return 'holder';
    });
    const heldOutcome = held.then(
      (outcome) => outcome,
      (error: unknown) => error,
    );
    await vi.advanceTimersByTimeAsync(550);
    const taken = other.run({ key: 'order-1' }, async (ctx) => {
      await ctx.step('charge', async () => {
        charges.push('other');
      });
      return 'other';
    });
    await vi.advanceTimersByTimeAsync(1000);
    // Assert: the key was taken over, and only the process that holds it charged.
    await expect(taken).resolves.toMatchObject({ status: 'executed', value: 'other' });
    expect(await heldOutcome).toBeInstanceOf(LeaseLostError);
    expect(charges).toEqual(['other']);
  });

  it('runs from when an extension was asked for, not from its reply', async () => {
    // Arrange: a 500 ms lease; the handler extends it at once, the extension's reply taking 300 ms.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const store = slowReplies({ extend: true }, 300);
    const clock = { now: () => Date.now() };
    const idempotency = createIdempotency({
      store,
      clock,
      leaseMs: 500,
      batch: false,
      extendLease: false,
    });
    let effects = 0;
    // Act: the step comes at 600 ms, after the end the store gave the lease (500 ms).
    const run = idempotency
      .run({ key: 'order-2' }, async (ctx) => {
        await ctx.extendLease();
        await sleep(300);
        await ctx.step('charge', async () => {
          effects++;
        });
        return 'done';
      })
      .then(
        (outcome) => outcome,
        (error: unknown) => error,
      );
    await vi.advanceTimersByTimeAsync(1000);
    // Assert
    expect(await run).toBeInstanceOf(LeaseLostError);
    expect(effects).toBe(0);
  });

  it('is extended by one call at a time: a heartbeat waits for the handler’s extension in flight', async () => {
    // Arrange: a store that holds the reply to the handler's extension (2 s, applied at once) until the
    // test lets it go, and counts the extensions in flight.
    const store = memoryStore();
    const extend = store.extend.bind(store);
    let inFlight = 0;
    let mostInFlight = 0;
    let releaseAsked: (() => void) | undefined;
    store.extend = async (key, token, leaseMs) => {
      inFlight++;
      mostInFlight = Math.max(mostInFlight, inFlight);
      try {
        const held = await extend(key, token, leaseMs);
        if (leaseMs === 2000) await new Promise<void>((resolve) => (releaseAsked = resolve));
        return held;
      } finally {
        inFlight--;
      }
    };
    const idempotency = createIdempotency({ store, leaseMs: '300ms', batch: false });
    // Act: while the handler's extension is held, several heartbeat periods (100 ms each) pass.
    const outcome = await idempotency.run({ key: 'order-3' }, async (ctx) => {
      const asked = ctx.extendLease('2s');
      await new Promise((resolve) => setTimeout(resolve, 600));
      releaseAsked?.();
      await asked;
      return 'done';
    });
    // Assert: no beat ran beside it, so which reply came last never decided the lease's end.
    expect(outcome).toMatchObject({ status: 'executed', value: 'done' });
    expect(mostInFlight).toBe(1);
  });
});
