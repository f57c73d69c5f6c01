/**
 * The handler brings its lease's end forward (`ctx.extendLease('200ms')` after `'3s'`) while a heartbeat,
 * queued behind that call, watches the later end; the heartbeat's own extension then hangs. The signal must
 * abort at the end the handler asked for, not at the one it gave up (the store's lease ends at the sooner
 * one, and a retry may take the key over from then).
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';

describe("a lease's end brought forward while a heartbeat watches the later one", () => {
  it('aborts the signal at the sooner end when the heartbeat hangs', async () => {
    // Arrange: the handler's shorter extension is answered after the first beat began (100 to 150 ms
    // in); every heartbeat's extension then hangs.
    const store = memoryStore();
    const extend = store.extend.bind(store);
    store.extend = async (key, token, leaseMs) => {
      if (leaseMs === 200) await new Promise((resolve) => setTimeout(resolve, 250));
      else if (leaseMs !== 3000) await new Promise(() => {});
      return extend(key, token, leaseMs);
    };
    const idempotency = createIdempotency({ store, leaseMs: '300ms' });
    let abortedAfterMs: number | undefined;
    // Act: the run's completion is refused either way (the store's lease ran out at the sooner end).
    const settled = idempotency.run({ key: 'shortened' }, async (ctx) => {
      const startedAt = performance.now();
      ctx.signal.addEventListener('abort', () => {
        abortedAfterMs = performance.now() - startedAt;
      });
      await ctx.extendLease('3s');
      await ctx.extendLease('200ms');
      const until = startedAt + 2000;
      while (!ctx.signal.aborted && performance.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    });
    await settled.catch(() => undefined);
    // Assert: before, the expiry timer stayed on the 3 s end, and the signal aborted only then.
    expect(abortedAfterMs).toBeDefined();
    expect(abortedAfterMs as number).toBeLessThan(1000);
  });
});
