/**
 * What every group of store conformance checks is built from: {@link CheckKit.check}, which runs a
 * check's body on a store of its own, and the suite's short lease. Kept apart from the groups so that each
 * of them is only its checks.
 * @module
 */
import { randomUUID } from 'node:crypto';
import type { Store } from '../store/store.js';
import type { StoreCheck, StoreSuiteOptions } from './suite-options.js';

/** A day, in ms: a retention or reservation no check outlives. */
export const DAY = 86_400_000;

/** Resolve after `ms`: the time-based checks wait for a lease or a retention to end. */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The body of a check: `store` is the check's own, `key` makes a key unique to the check (under
 * `prefix`, with an optional `label` to read in messages), `prefix` is the one the store was built with.
 */
export type CheckBody = (
  store: Store,
  key: (label?: string) => string,
  prefix: string,
) => Promise<void>;

/** What a group of checks is given. */
export interface CheckKit {
  /** Name a check whose `run` builds a store of its own, runs `body` on it and always disposes of it. */
  check(name: string, body: CheckBody): StoreCheck;
  /** Lease used by time-based checks, in ms (the suite's `shortLeaseMs`). */
  lease: number;
}

/** The kit of the checks of the suite `options`. */
export function createCheckKit(options: StoreSuiteOptions): CheckKit {
  // Every check gets its own store and its own keys, and always disposes of the store.
  function check(name: string, body: CheckBody) {
    return {
      name,
      async run() {
        const prefix = `conf:${process.pid}:${randomUUID().slice(0, 8)}:`;
        const store = await options.createStore(prefix);
        const key = (label = 'k') => `${prefix}${label}:${randomUUID()}`;
        try {
          await body(store, key, prefix);
        } finally {
          await options.disposeStore?.(store);
        }
      },
    } satisfies StoreCheck;
  }
  return { check, lease: options.shortLeaseMs ?? 250 };
}
