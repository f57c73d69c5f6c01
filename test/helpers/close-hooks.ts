/**
 * What the consumers' "no hook after close()" tests share: a handler held past the drain and then failing,
 * and hooks that record each call by name, so that a call after `close()` resolved shows in the list.
 */
import { deferred } from './deferred.js';

/** A handler that waits until `release()`, then throws (a declined card): its message is dead-lettered. */
export function heldFailingHandler(): {
  handler: () => Promise<never>;
  started: () => boolean;
  release: () => void;
} {
  const gate = deferred();
  let started = false;
  return {
    handler: async () => {
      started = true;
      await gate.promise;
      throw new Error('card declined');
    },
    started: () => started,
    release: gate.resolve,
  };
}

/** Every consumer hook, each pushing its name onto `calls`. */
export function recordingHooks(calls: string[]) {
  const record = (name: string) => () => void calls.push(name);
  return {
    onExecuted: record('executed'),
    onDuplicate: record('duplicate'),
    onRetry: record('retry'),
    onDeadLetter: record('dead letter'),
    onBrokerError: record('broker error'),
    onConsumerError: record('consumer error'),
  };
}

/**
 * Close `consumer` while a settle it gave up on is held, and let that settle through `afterMs` later
 * (`release`: a stalled link recovering, a held confirm delivered). `'closed'` is pushed onto `order` as
 * `close()` resolves, so a report made after it shows after it in the list.
 */
export async function closeThenRelease(
  consumer: { close(): Promise<boolean> },
  order: string[],
  release: () => void,
  afterMs = 300,
): Promise<boolean> {
  const closing = consumer.close().then((closed) => {
    order.push('closed');
    return closed;
  });
  setTimeout(release, afterMs);
  return closing;
}
