/**
 * The library's own runs (a consumer's records of dead letters and hand-backs, marked `UNREPORTED_RUN`)
 * are not reported to the engine's outcome hooks, which count the application's runs; a store call of
 * theirs that fails still is (`onStoreError`: the store's health, whoever called it).
 */
import { describe, expect, it } from 'vitest';
import { UNREPORTED_RUN } from '../../../src/core/unreported-runs.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';
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
});
