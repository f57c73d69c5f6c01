/** An engine that fails open over a store whose claims all fail (an outage), for the failed-open path. */
import { createIdempotency, type Idempotency, memoryStore, type Store } from '../../src/index.js';

/** An engine with `failOpen: true` whose store refuses every claim (batching off, so each one fails). */
export function failingOpenEngine(): Idempotency {
  const inner = memoryStore();
  const store: Store = {
    ...inner,
    capabilities: { ...inner.capabilities, batch: false },
    claim: () => Promise.reject(new Error('connection refused')),
  };
  return createIdempotency({ store, failOpen: true });
}
