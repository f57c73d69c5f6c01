/**
 * The library's own runs (a consumer's records of dead letters and hand-backs, marked `UNREPORTED_RUN`)
 * are not reported to the engine's outcome hooks, which count the application's runs; a store call of
 * theirs that fails still is (`onStoreError`: the store's health, whoever called it).
 */
import { describe, expect, it } from 'vitest';
import { UNREPORTED_RUN } from '../../../src/core/unreported-runs.js';
import {
  createIdempotency,
  type IdempotencyOptions,
  memoryStore,
  type Store,
} from '../../../src/index.js';
import { unreachableClaimStore } from '../../helpers/broken-store.js';

describe('unreported runs', () => {
  it('run and replay like any run, without outcome hooks', async () => {
    const seen: string[] = [];
    const engine = createIdempotency({
      store: memoryStore(),
      hooks: {
        onExecuted: () => void seen.push('executed'),
        onReplayed: () => void seen.push('replayed'),
        onFailed: () => void seen.push('failed'),
        onMismatch: () => void seen.push('mismatch'),
      },
    });
    const own = { key: 'letter-1', scope: 'dead-letter:orders', [UNREPORTED_RUN]: true as const };
    await expect(engine.run(own, () => 'letter')).resolves.toMatchObject({ status: 'executed' });
    await expect(engine.run(own, () => 'again')).resolves.toMatchObject({
      status: 'replayed',
      value: 'letter',
    });
    await expect(
      engine.run({ ...own, key: 'letter-2' }, () => {
        throw new Error('not recorded');
      }),
    ).rejects.toThrow('not recorded');
    expect(seen).toEqual([]);
    // The application's own run of the same engine is reported as ever.
    await engine.run({ key: 'order-1' }, () => 'ok');
    expect(seen).toEqual(['executed']);
  });

  it('still report a store call that failed', async () => {
    const operations: string[] = [];
    const engine = createIdempotency({
      store: unreachableClaimStore(),
      hooks: { onStoreError: (event) => void operations.push(event.operation) },
    });
    const own = { key: 'letter-1', [UNREPORTED_RUN]: true as const };
    await expect(engine.run(own, () => 'letter')).rejects.toThrow();
    expect(operations).toEqual(['claim']);
  });

  it('are made with what the engine read at its creation, as its inspect reads them', async () => {
    // A consumer hands the user's options object to the engine; changed afterwards, it must not move
    // the records: a dead letter recorded elsewhere than where `inspect` looks is never found.
    const options: IdempotencyOptions = { store: memoryStore(), namespace: 'orders' };
    const engine = createIdempotency(options);
    options.namespace = 'payments';
    const own = { key: 'letter-1', scope: 'dead-letter:orders', [UNREPORTED_RUN]: true as const };
    await engine.run(own, () => 'letter');
    expect(await engine.inspect('letter-1', 'dead-letter:orders')).toMatchObject({
      state: 'completed',
    });
  });

  it("share the engine's store calls and their limit", async () => {
    // One call outstanding at most (batchMaxInFlight 1): an unreported run's claim waits for the
    // application's, as it would for another application run, instead of going beside it.
    const inner = memoryStore();
    let outstanding = 0;
    let most = 0;
    const slow = async <T>(call: () => Promise<T>): Promise<T> => {
      outstanding++;
      most = Math.max(most, outstanding);
      try {
        await new Promise((resolve) => setTimeout(resolve, 20));
        return await call();
      } finally {
        outstanding--;
      }
    };
    const store: Store = {
      ...inner,
      capabilities: { ...inner.capabilities, batchMaxInFlight: 1 },
      claim: (key, claimOptions) => slow(() => inner.claim(key, claimOptions)),
      claimMany: (requests) => slow(() => inner.claimMany!(requests)),
      complete: (...args) => slow(() => inner.complete(...args)),
      completeMany: (requests) => slow(() => inner.completeMany!(requests)),
      completeAndClaimMany: (completes, claims) =>
        slow(() => inner.completeAndClaimMany!(completes, claims)),
    };
    const engine = createIdempotency({ store });
    const app = engine.run({ key: 'order-1' }, () => 'ok');
    await new Promise((resolve) => setImmediate(resolve));
    const letter = { key: 'letter-1', [UNREPORTED_RUN]: true as const };
    const own = engine.run(letter, () => 'letter');
    await Promise.all([app, own]);
    expect(most).toBe(1);
  });
});
