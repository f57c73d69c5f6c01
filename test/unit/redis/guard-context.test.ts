/**
 * The Redis store's deadline timer and the async context of the calls it bounds. One timer bounds every
 * call in flight by `timeoutMs`; it is armed by the call that finds none in flight, then kept (and
 * re-armed from its own callback) while calls keep coming. Armed in that call's async context, it kept the
 * request's AsyncLocalStorage stores (a request, its body) alive after its call had been answered, for as
 * long as any other call was outstanding: on a busy service, without end.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, expect, it } from 'vitest';
import { redisStore } from '../../../src/redis/index.js';
import { collected } from '../../helpers/collected.js';

describe('the redis store deadline timer', () => {
  it('keeps no context of a call that was answered, while other calls are outstanding', async () => {
    // Arrange: a node-redis-shaped client (no I/O) whose replies the test sends: each call waits for its own.
    const replies: Array<(reply: unknown) => void> = [];
    const store = redisStore({
      client: {
        sendCommand: () => new Promise((resolve) => replies.push(resolve)),
      },
      timeoutMs: 60_000,
      checkEvictionPolicy: false,
    });
    const requestContext = new AsyncLocalStorage<{ body: Uint8Array }>();
    let first: WeakRef<object> | undefined;
    let firstDone = false;
    // The first request's call arms the timer, in the context of that request (a body of 1 MB). Nothing
    // here keeps its promises: they carry the request's context too.
    const startFirst = () => {
      const request = { body: new Uint8Array(1_000_000) };
      first = new WeakRef(request);
      requestContext.run(request, () => {
        void store.get('first').then(() => {
          firstDone = true;
        });
      });
    };
    startFirst();
    // The second request's call is outstanding while the first is answered: the timer stays armed.
    const secondCall = requestContext.run({ body: new Uint8Array(1) }, () => store.get('second'));
    // Act: the first call gets its answer (no record).
    replies.shift()?.(null);
    while (!firstDone) await new Promise((resolve) => setTimeout(resolve, 5));
    // Assert: the first request is gone while the second call still waits.
    const firstGone = await collected(first as WeakRef<object>);
    const secondAnswer = replies.shift();
    secondAnswer?.(null);
    await secondCall;
    expect(secondAnswer).toBeDefined();
    expect(firstGone).toBe(true);
  });
});
