import { describe, expect, it } from 'vitest';
import { AbandonedClaimError, isAbandonedClaimError } from '../../../src/core/abandoned-claim.js';
import { createIdempotency, isStoreUnavailableError, memoryStore } from '../../../src/index.js';
import { ManualClock } from '../../helpers/clock.js';

// A claim its caller (a consumer past `storeTimeout`) gave up on answers claimed: the caller's function
// throws AbandonedClaimError at once, and the engine must release the claim and report a slow claim,
// not a failed execution (onFailed fired for it before, counting a handler that never ran).
describe('a claim abandoned by its caller', () => {
  it('is released, reported to onStoreError (claim), never to onFailed, and never stored as an error', async () => {
    // Arrange: an engine that would store a handler's error as final.
    const store = memoryStore({ clock: new ManualClock() });
    const failed: unknown[] = [];
    const storeErrors: Array<{ operation: string; error: unknown }> = [];
    const idempotency = createIdempotency({
      store,
      extendLease: false,
      storeErrors: true,
      hooks: {
        onFailed: (event) => void failed.push(event),
        onStoreError: (event) => void storeErrors.push(event),
      },
    });
    const abandoned = new AbandonedClaimError('answered after the caller gave up');

    // Act
    const run = idempotency.run({ key: 'order-1', scope: 'consumer:billing' }, () => {
      throw abandoned;
    });

    // Assert
    await expect(run).rejects.toBe(abandoned);
    expect(failed).toEqual([]);
    expect(storeErrors).toMatchObject([{ operation: 'claim', error: abandoned }]);
    expect(isStoreUnavailableError(storeErrors[0]?.error)).toBe(true);
    // Released, not completed with the error: the next run executes.
    const next = await idempotency.run({ key: 'order-1', scope: 'consumer:billing' }, () => 'ran');
    expect(next.status).toBe('executed');
  });

  it('tells the brand apart from other errors', () => {
    // Act / Assert
    expect(isAbandonedClaimError(new AbandonedClaimError('late'))).toBe(true);
    expect(isAbandonedClaimError(new Error('late'))).toBe(false);
    expect(isAbandonedClaimError(undefined)).toBe(false);
  });
});
