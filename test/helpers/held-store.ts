/**
 * A store whose chosen calls never answer until the test lets them through: a third-party store without
 * timeouts, or a hung connection without a command timeout, over a real store. Batching is off (each run
 * makes its own calls), so one held call holds one delivery, not a whole batch.
 */
import type { Store } from '../../src/index.js';

/** The calls that can be held. */
export type HeldCall = 'claim' | 'release' | 'complete' | 'inspect';

/** A store with calls held, and the controls to hold and answer them. */
export interface HeldStore {
  /** The store to give the engine. */
  store: Store;
  /** Hold every `call` made from now on (`false` lets later ones through at once). */
  hold(call: HeldCall, on: boolean): void;
  /** How many `call`s are held, unanswered, now. */
  held(call: HeldCall): number;
  /** How many `call`s were made, held or not. */
  made(call: HeldCall): number;
  /**
   * Send the oldest held `call` to the real store and answer it (late), and resolve to its answer.
   */
  answerOldest(call: HeldCall): Promise<unknown>;
}

/** Wrap `inner` (a real store) so that chosen calls hang. */
export function heldStore(inner: Store): HeldStore {
  const holding = new Set<HeldCall>();
  const queues: Record<HeldCall, Array<() => Promise<unknown>>> = {
    claim: [],
    release: [],
    complete: [],
    inspect: [],
  };
  const counts: Record<HeldCall, number> = { claim: 0, release: 0, complete: 0, inspect: 0 };
  const store = Object.create(inner) as Store;
  Object.defineProperty(store, 'capabilities', {
    value: { ...inner.capabilities, batch: false },
  });
  Object.defineProperty(store, 'claimMany', { value: undefined });
  Object.defineProperty(store, 'completeMany', { value: undefined });
  const wrap = <A extends unknown[], R>(call: HeldCall, real: (...args: A) => Promise<R>) =>
    ((...args: A): Promise<R> => {
      counts[call]++;
      if (!holding.has(call)) return real(...args);
      return new Promise<R>((resolve, reject) => {
        queues[call].push(() => {
          const answer = real(...args);
          answer.then(resolve, reject);
          return answer;
        });
      });
    }) as (...args: A) => Promise<R>;
  store.claim = wrap('claim', inner.claim.bind(inner));
  store.release = wrap('release', inner.release.bind(inner));
  store.complete = wrap('complete', inner.complete.bind(inner));
  if (inner.inspect === undefined) throw new Error('heldStore needs a store with inspect()');
  store.inspect = wrap('inspect', inner.inspect.bind(inner));
  return {
    store,
    hold: (call, on) => (on ? holding.add(call) : holding.delete(call)),
    held: (call) => queues[call].length,
    made: (call) => counts[call],
    answerOldest: async (call) => {
      const next = queues[call].shift();
      if (next === undefined) throw new Error(`no ${call} is held`);
      return next();
    },
  };
}
