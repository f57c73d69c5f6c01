/**
 * withBatching refuses one caller's invalid durations alone: the store would refuse a whole batch for one
 * invalid item, and with it every other caller coalesced into the same tick.
 */
import { describe, expect, it, vi } from 'vitest';
import { isInvalidOptionsError, memoryStore } from '../../../src/index.js';
import { withBatching } from '../../../src/store/batching.js';

/** The settled promise's reason when it is an InvalidOptionsError naming `field`, else a description. */
function refusal(result: PromiseSettledResult<unknown>, field: string): string {
  if (result.status === 'fulfilled') return `fulfilled with ${JSON.stringify(result.value)}`;
  const reason = result.reason as Error;
  if (!isInvalidOptionsError(reason)) return `rejected with ${String(reason)}`;
  return reason.message.includes(field) ? 'InvalidOptionsError' : reason.message;
}

describe('withBatching and invalid durations', () => {
  it('rejects the claim with an invalid lease alone, and claims the others of its tick in one batch', async () => {
    // Arrange
    const store = memoryStore();
    const claim = vi.spyOn(store, 'claim');
    const claimMany = vi.spyOn(store, 'claimMany');
    const batched = withBatching(store);
    // Act: three callers in one tick, the second with a NaN lease.
    const results = await Promise.allSettled([
      batched.claim('a', { fingerprint: 'fp', leaseMs: 60_000 }),
      batched.claim('bad', { fingerprint: 'fp', leaseMs: Number.NaN }),
      batched.claim('b', { fingerprint: 'fp', leaseMs: 60_000, reserveMs: 0 }),
    ]);
    // Assert
    expect(refusal(results[1]!, 'leaseMs')).toBe('InvalidOptionsError');
    expect(results[0]).toMatchObject({ status: 'fulfilled', value: { claimed: true } });
    expect(results[2]).toMatchObject({ status: 'fulfilled', value: { claimed: true } });
    expect(claim).not.toHaveBeenCalled();
    expect(claimMany.mock.calls.map(([batch]) => batch.map((item) => item.key))).toEqual([
      ['a', 'b'],
    ]);
    expect(await store.get('bad')).toBeUndefined();
  });

  it('rejects a claim with an invalid reservation alone, and sends the other one of its tick', async () => {
    const store = memoryStore();
    const claim = vi.spyOn(store, 'claim');
    const claimMany = vi.spyOn(store, 'claimMany');
    const batched = withBatching(store);
    const [bad, good] = await Promise.allSettled([
      batched.claim('bad', { fingerprint: 'fp', leaseMs: 60_000, reserveMs: -1 }),
      batched.claim('good', { fingerprint: 'fp', leaseMs: 60_000 }),
    ]);
    expect(refusal(bad!, 'reserveMs')).toBe('InvalidOptionsError');
    expect(good).toMatchObject({ status: 'fulfilled', value: { claimed: true } });
    // Alone in its batch, the valid claim went as a single call.
    expect(claim.mock.calls.map(([key]) => key)).toEqual(['good']);
    expect(claimMany).not.toHaveBeenCalled();
  });

  it('rejects the completion with an invalid retention alone, and completes the others of its tick', async () => {
    // Arrange: three keys held.
    const store = memoryStore();
    const batched = withBatching(store);
    const tokens: number[] = [];
    for (const key of ['a', 'bad', 'b']) {
      const held = await batched.claim(key, { fingerprint: 'fp', leaseMs: 60_000 });
      if (!held.claimed) throw new Error(`${key} not claimed`);
      tokens.push(held.token);
    }
    const completeMany = vi.spyOn(store, 'completeMany');
    const outcome = new Uint8Array([1]);
    // Act: their completions in one tick, the second with a negative retention.
    const results = await Promise.allSettled([
      batched.complete('a', tokens[0]!, outcome, 60_000),
      batched.complete('bad', tokens[1]!, outcome, -1),
      batched.complete('b', tokens[2]!, outcome, 60_000),
    ]);
    // Assert
    expect(refusal(results[1]!, 'retentionMs')).toBe('InvalidOptionsError');
    expect(results[0]).toEqual({ status: 'fulfilled', value: true });
    expect(results[2]).toEqual({ status: 'fulfilled', value: true });
    expect(completeMany.mock.calls.map(([batch]) => batch.map((item) => item.key))).toEqual([
      ['a', 'b'],
    ]);
    expect((await store.get('a'))?.status).toBe('completed');
    expect((await store.get('bad'))?.status).toBe('in_progress');
  });

  it('keeps an invalid claim out of a call that carries completions and claims together', async () => {
    // Arrange: one key held, to complete in the same tick as two claims.
    const store = memoryStore();
    // Spied before withBatching, which binds the method once.
    const both = vi.spyOn(store, 'completeAndClaimMany');
    const batched = withBatching(store);
    const held = await batched.claim('done', { fingerprint: 'fp', leaseMs: 60_000 });
    if (!held.claimed) throw new Error('not claimed');
    // Act
    const [completed, bad, good] = await Promise.allSettled([
      batched.complete('done', held.token, new Uint8Array([1]), 60_000),
      batched.claim('bad', { fingerprint: 'fp', leaseMs: Number.POSITIVE_INFINITY }),
      batched.claim('good', { fingerprint: 'fp', leaseMs: 60_000 }),
    ]);
    // Assert
    expect(refusal(bad!, 'leaseMs')).toBe('InvalidOptionsError');
    expect(completed).toEqual({ status: 'fulfilled', value: true });
    expect(good).toMatchObject({ status: 'fulfilled', value: { claimed: true } });
    expect(
      both.mock.calls.map(([completes, claims]) => [
        completes.map((item) => item.key),
        claims.map((item) => item.key),
      ]),
    ).toEqual([[['done'], ['good']]]);
  });

  it('rejects rather than throws, and queues nothing for a refused call', async () => {
    const store = memoryStore();
    const claim = vi.spyOn(store, 'claim');
    const claimMany = vi.spyOn(store, 'claimMany');
    const batched = withBatching(store);
    let pending: Promise<unknown> | undefined;
    expect(() => {
      pending = batched.claim('bad', { fingerprint: 'fp', leaseMs: 0 });
    }).not.toThrow();
    await expect(pending).rejects.toThrow(
      /withBatching\(memory\): leaseMs must be a positive number of ms/,
    );
    await new Promise((resolve) => setImmediate(resolve));
    expect(claim).not.toHaveBeenCalled();
    expect(claimMany).not.toHaveBeenCalled();
  });
});
