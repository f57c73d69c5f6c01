/**
 * Child process of the claim storm (see `claim-storm.ts`): builds its own store, waits for 'go', claims its
 * share of keys with many claims in flight, and reports the keys it won.
 * @module
 */
import type { Store } from '../store/store.js';
import type { StormWorkerConfig, StormWorkerReport } from './claim-storm.js';

const IN_FLIGHT = 32;
const BATCH = 25;

// The storm's runner went away (it exited, or its test timed out and the run ended): stop, rather than
// run on as an orphan holding the store's connections.
process.on('disconnect', () => process.exit(1));

async function main(): Promise<void> {
  const config = JSON.parse(process.env.IDEMPOTENCY_STORM_CONFIG ?? '{}') as StormWorkerConfig;
  const mod = (await import(config.module)) as Record<
    string,
    (arg: unknown) => Promise<Store> | Store
  >;
  const factory = mod[config.exportName];
  if (typeof factory !== 'function')
    throw new Error(`${config.module} has no ${config.exportName}()`);
  const store = await factory(config.argument);

  await new Promise<void>((resolve) => {
    process.send?.('ready');
    process.once('message', () => resolve());
  });

  // Each process walks the keys from a different offset, so every key is contended all the time.
  const order = Array.from(
    { length: config.claims },
    (_, i) => config.keys[(i + config.seed * 37) % config.keys.length]!,
  );
  const report: StormWorkerReport = { wins: [], claims: 0, errors: [] };
  let next = 0;
  async function lane(): Promise<void> {
    while (next < order.length) {
      const key = order[next++]!;
      try {
        const result = await store.claim(key, { fingerprint: 'storm', leaseMs: 120_000 });
        report.claims++;
        if (result.claimed) report.wins.push(key);
      } catch (error) {
        report.errors.push(String(error));
      }
    }
  }
  // A store that takes batches gets some of its lanes' claims as batches, so single and batched claims race.
  async function batchLane(): Promise<void> {
    while (next < order.length) {
      const keys = order.slice(next, next + BATCH);
      next += keys.length;
      try {
        const results = await store.claimMany!(
          keys.map((key) => ({ key, fingerprint: 'storm', leaseMs: 120_000 })),
        );
        report.claims += results.length;
        for (const [i, result] of results.entries()) if (result.claimed) report.wins.push(keys[i]!);
      } catch (error) {
        report.errors.push(String(error));
      }
    }
  }
  // A store that also takes completions and claims in one call gets a third kind of lane: each call
  // completes what its previous call won (a completed record blocks claims as a live lease does) and
  // claims the next keys, so completions of one process land among the claims of the others.
  async function completeAndClaimLane(): Promise<void> {
    let won: Array<{ key: string; token: number }> = [];
    while (next < order.length || won.length > 0) {
      const keys = order.slice(next, next + BATCH);
      next += keys.length;
      try {
        const { completed, claimed } = await store.completeAndClaimMany!(
          won.map(({ key, token }) => ({
            key,
            token,
            outcome: Buffer.from('storm'),
            retentionMs: 120_000,
          })),
          keys.map((key) => ({ key, fingerprint: 'storm', leaseMs: 120_000 })),
        );
        for (const [i, ok] of completed.entries()) {
          if (!ok)
            report.errors.push(`completion of ${won[i]!.key} by its own claim was fenced out`);
        }
        won = [];
        report.claims += claimed.length;
        for (const [i, result] of claimed.entries()) {
          if (!result.claimed) continue;
          report.wins.push(keys[i]!);
          won.push({ key: keys[i]!, token: result.token });
        }
      } catch (error) {
        report.errors.push(String(error));
        won = [];
      }
    }
  }
  const batched = store.capabilities.batch === true && typeof store.claimMany === 'function';
  const combined = batched && typeof store.completeAndClaimMany === 'function';
  const lanes = combined
    ? [lane, batchLane, completeAndClaimLane]
    : batched
      ? [lane, batchLane]
      : [lane];
  await Promise.all(Array.from({ length: IN_FLIGHT }, (_, i) => lanes[i % lanes.length]!()));
  await store.close?.();
  await new Promise<void>((resolve) => process.send?.(report, () => resolve()));
  // The factory may have opened clients the store does not own (and so does not close): exit explicitly.
  process.exit(0);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
