import { describe, expect, it } from 'vitest';
import { AbandonedClaimError } from '../../../src/core/abandoned-claim.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { ManualClock } from '../../helpers/clock.js';

// A consumer gives up on a claim after `storeTimeout`; a claim that answers *claimed* after that throws
// AbandonedClaimError out of the function and the engine releases it. A release deletes the record's
// steps and its reservation. For a takeover (attempt > 1) those are the crashed attempt's: a step it
// recorded (a charge made) was then run again by the next delivery, although nothing ran under the
// abandoned claim. The Redis store's own refused claims leave a takeover to its lease for this reason
// (redis-store.ts, releaseRefused); an abandoned takeover must be left alike.
describe('a takeover claim abandoned by its caller', () => {
  it("keeps the crashed attempt's recorded steps: the next attempt replays them, never runs them again", async () => {
    // Arrange: attempt 1 records its charge, then its process "dies" (its run never settles).
    const clock = new ManualClock();
    const store = memoryStore({ clock });
    const idempotency = createIdempotency({ store, clock, extendLease: false, leaseMs: 1_000 });
    const request = { key: 'order-1', scope: 'consumer:billing' };
    let charges = 0;
    const charge = () => {
      charges++;
      return 'ch_1';
    };
    let crashed!: () => void;
    const stepRecorded = new Promise<void>((resolve) => {
      void idempotency
        .run(request, async (ctx) => {
          await ctx.step('charge', charge);
          resolve();
          await new Promise<void>((end) => {
            crashed = end;
          });
        })
        .catch(() => undefined);
    });
    await stepRecorded;
    clock.advance(2_000);
    // The redelivery's claim takes the key over, but answers after the consumer gave up on it.
    const abandoned = idempotency.run(request, () => {
      throw new AbandonedClaimError('answered after the caller gave up');
    });
    await expect(abandoned).rejects.toBeInstanceOf(AbandonedClaimError);

    // Act: the next redelivery, once any lease left behind has ended.
    clock.advance(2_000);
    const next = await idempotency.run(request, async (ctx) => ctx.step('charge', charge));

    // Assert
    expect(next).toMatchObject({ status: 'executed', value: 'ch_1' });
    expect(charges).toBe(1);
    crashed();
  });
});
