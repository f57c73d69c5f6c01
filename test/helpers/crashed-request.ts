/**
 * A crashed request on a real store, for the CLI's tests: a run that records its `charge` step and then
 * hangs, as a killed process's would, after which its lease ends and its key stays reserved for it.
 */
import { randomUUID } from 'node:crypto';
import { createIdempotency, type Idempotency, type Store } from '../../src/index.js';
import { hangAfterCharge } from './crashed-step.js';

/** The lease of {@link crashAfterCharge}'s runs: short, so a test waits little for it to end. */
export const CRASH_LEASE_MS = 300;

/**
 * Run a request that records its `charge` step and then hangs, and wait for its lease to end; return its
 * key, its storage key (reserved for the request for the engine's retention, a day) and the engine that
 * ran it (which retries it).
 */
export async function crashAfterCharge(
  store: Store,
): Promise<{ idempotency: Idempotency; key: string; storageKey: string }> {
  const idempotency = createIdempotency({
    store,
    leaseMs: CRASH_LEASE_MS,
    extendLease: false,
    cache: false,
  });
  const key = `order-${randomUUID()}`;
  await hangAfterCharge(idempotency, { key, payload: { amount: 5 } }, () => ({ id: 'ch_1' }));
  await new Promise((resolve) => setTimeout(resolve, CRASH_LEASE_MS + 150));
  return { idempotency, key, storageKey: idempotency.storageKeyFor(key) };
}
