/**
 * The engine's heartbeat timer and the async context of the runs it beats for. One timer per lease length
 * ticks for every run in flight; it is armed by the run that finds no other in flight, then re-armed from
 * its own callback while runs keep coming. Armed in that run's async context, it kept the run's
 * AsyncLocalStorage stores (a request, its body) alive after the run had ended, for as long as the service
 * stayed busy: on a service under steady load, one request's context for weeks.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { collected } from '../../helpers/collected.js';

describe('the heartbeat timer', () => {
  it('keeps no context of a run that has ended, while other runs keep it ticking', async () => {
    // Arrange: a store that counts lease extensions, so the test knows when the timer has ticked.
    const store = memoryStore();
    let extensions = 0;
    const extend = store.extend.bind(store);
    store.extend = (...args) => {
      extensions++;
      return extend(...args);
    };
    const idempotency = createIdempotency({ store, leaseMs: '600ms' });
    const requestContext = new AsyncLocalStorage<{ body: Uint8Array }>();
    let first: WeakRef<object> | undefined;
    let firstDone = false;
    let finishSecond = () => {};
    let secondDone = false;
    let secondSignal: AbortSignal | undefined;
    // The first run arms the timer, in the context of its request (a body of 1 MB).
    const startFirst = () => {
      const request = { body: new Uint8Array(1_000_000) };
      first = new WeakRef(request);
      requestContext.run(request, () => {
        void idempotency
          .run({ key: 'first' }, () => new Promise((resolve) => setTimeout(resolve, 50)))
          .then(() => {
            firstDone = true;
          });
      });
    };
    startFirst();
    // The second keeps the timer ticking after the first has ended.
    requestContext.run({ body: new Uint8Array(1) }, () => {
      void idempotency
        .run({ key: 'second' }, ({ signal }) => {
          secondSignal = signal;
          return new Promise<void>((resolve) => (finishSecond = resolve));
        })
        .then(() => {
          secondDone = true;
        });
    });
    // Act: the first run ends; the timer ticks on, and extends the second's lease twice. (Should a stalled
    // event loop let that lease run out, the second run stops being beaten, and nothing ticks to wait for.)
    while (!firstDone) await new Promise((resolve) => setTimeout(resolve, 5));
    const extendedBefore = extensions;
    while (extensions < extendedBefore + 2 && secondSignal?.aborted !== true) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // Assert: the first request is gone while the second still runs.
    const firstGone = await collected(first as WeakRef<object>);
    finishSecond();
    while (!secondDone) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(firstGone).toBe(true);
  });
});
