/**
 * The lease as this process sees it is timed on this process's clock: a store whose clock runs behind
 * (another server) must not make a healthy lease look expired, so that one failed extension aborts it.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createIdempotency, memoryStore, type Store } from '../../../src/index.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('a lease on a store whose clock runs behind', () => {
  it('survives one failed extension while it still has time by this process’s clock', async () => {
    // Arrange: the store's clock is 600 ms behind; a 1 s lease; the first extension fails (a blip).
    vi.useFakeTimers({
      toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'],
    });
    const inner = memoryStore({ clock: { now: () => Date.now() - 600 } });
    let extensions = 0;
    const store: Store = {
      ...inner,
      capabilities: { ...inner.capabilities, batch: false },
      extend: (...args) => {
        extensions++;
        return extensions === 1
          ? Promise.reject(new Error('connection reset'))
          : inner.extend(...args);
      },
    };
    const idempotency = createIdempotency({ store, leaseMs: 1000, batch: false });
    let aborted: boolean | undefined;
    // Act: a handler running 2.5 leases.
    const run = idempotency.run({ key: 'k' }, async (ctx) => {
      await new Promise((resolve) => setTimeout(resolve, 2500));
      aborted = ctx.signal.aborted;
      return 'done';
    });
    await vi.advanceTimersByTimeAsync(2600);
    // Assert: the blip did not abort the run; later extensions kept it.
    await expect(run).resolves.toMatchObject({ status: 'executed', value: 'done' });
    expect(aborted).toBe(false);
    expect(extensions).toBeGreaterThanOrEqual(3);
  });
});
