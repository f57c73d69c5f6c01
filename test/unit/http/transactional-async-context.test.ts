/**
 * The `currentIdempotency()` context of a transactional route (`asyncContext: true`), against a runner
 * that hands the handler a claim as the modes do (no database): the claim's fields, `step` unrecorded
 * with the claim's attempt, lease fields that have nothing to watch, nothing outside the handler, and a
 * runner whose `tx` carries no claim refused loudly rather than giving a context without a key.
 */
import { describe, expect, it } from 'vitest';
import { deriveDownstreamKey } from '../../../src/core/key.js';
import { currentIdempotency, transactionalHandler } from '../../../src/fetch/index.js';
import type { TransactionalAnswer, TransactionalClaim } from '../../../src/http/index.js';

const STORAGE_KEY = 'ab'.repeat(32);

/** A runner that hands `tx` to the handler and records what the context was once it returned. */
function claimRunner(tx: unknown) {
  const after: unknown[] = [];
  return {
    after,
    async runInTransaction(_claim: TransactionalClaim, fn: (tx: unknown) => unknown) {
      const value = fn(tx);
      after.push(currentIdempotency());
      return {
        status: 'executed' as const,
        value: await value,
        token: 7,
        attempt: 2,
        failedOpen: false,
      };
    },
  };
}

const claim = {
  token: 7,
  attempt: 2,
  storageKey: STORAGE_KEY,
  downstreamKey: (step: string) => deriveDownstreamKey(STORAGE_KEY, step),
};

const post = () =>
  new Request('http://localhost/payments', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': 'key-1' },
    body: '{}',
  });

describe('transactional route with asyncContext: true', () => {
  it("gives the claim's fields, a step run unrecorded with its attempt, and no lease to watch", async () => {
    // Arrange
    const runner = claimRunner(claim);
    const POST = transactionalHandler(
      runner,
      async (): Promise<TransactionalAnswer> => {
        const ctx = currentIdempotency();
        if (ctx === undefined) return { status: 500 };
        // Destructured, as handlers do with the middleware's context.
        const { key, scope, token, attempt, storageKey, downstreamKey, step, extendLease } = ctx;
        const stepped = await step('charge', (s) => s);
        const signal = ctx.signal;
        return {
          status: 200,
          body: {
            fields: { key, scope, token, attempt, storageKey, message: downstreamKey('m') },
            stepped,
            extended: (await extendLease('1m')) === undefined,
            aborted: signal.aborted,
            sameSignal: ctx.signal === signal,
          },
        };
      },
      { asyncContext: true, scope: () => 'tenant-a' },
    );

    // Act
    const res = await POST(post());

    // Assert
    expect(await res.json()).toEqual({
      fields: {
        key: 'key-1',
        scope: 'tenant-a',
        token: 7,
        attempt: 2,
        storageKey: STORAGE_KEY,
        message: claim.downstreamKey('m'),
      },
      stepped: { downstreamKey: claim.downstreamKey('charge'), attempt: 2 },
      extended: true,
      aborted: false,
      sameSignal: true,
    });
    // The runner's own code after the handler returned (the completion, COMMIT) sees no context.
    expect(runner.after).toEqual([undefined]);
  });

  it('refuses a runner whose tx carries no claim, as the handler failing', async () => {
    // Arrange
    const POST = transactionalHandler(claimRunner(undefined), () => ({ status: 200 }), {
      asyncContext: true,
    });

    // Act / Assert
    await expect(POST(post())).rejects.toThrow(/asyncContext needs a transactional mode/);
  });

  it("refuses an asyncContext that is not a boolean when it is created, as the middleware's", () => {
    expect(() =>
      transactionalHandler(claimRunner(claim), () => ({ status: 200 }), {
        asyncContext: 'true' as unknown as boolean,
      }),
    ).toThrow(/asyncContext/);
  });
});
