import { describe, expect, it, vi } from 'vitest';
import { isReplicationShortError } from '../../../src/index.js';
import { shortfallHandlers } from '../../../src/redis/replica-shortfalls.js';
import type { ReplicaWait } from '../../../src/redis/replica-wait.js';
import { PartialBatchError } from '../../../src/store/partial-batch.js';

const wait: ReplicaWait = { count: 1, timeoutMs: 50, command: ['WAIT', '1', '50'] };

/** What a short batch call threw. */
function thrownBy(call: () => unknown): PartialBatchError {
  try {
    call();
  } catch (error) {
    if (error instanceof PartialBatchError) return error;
    throw error;
  }
  throw new Error('did not throw');
}

describe('a Redis batch whose WAIT fell short', () => {
  it('reports completeMany`s applied completions as applied, not as failed', () => {
    // Arrange: two completions applied, one fenced out; no replica acknowledged them.
    const handlers = shortfallHandlers(wait, vi.fn());
    // Act
    const error = thrownBy(() =>
      handlers.completes({ reply: 'ignored', replicas: 0 }, () => [true, false, true], []),
    );
    // Assert: each applied item's caller gets a ReplicationShortError (an answer), and the message says so.
    expect(error.results).toEqual([expect.any(Error), false, expect.any(Error)]);
    expect((error.results as unknown[]).filter(isReplicationShortError)).toHaveLength(2);
    expect(error.message).not.toMatch(/could not be applied/);
    expect(error.message).toMatch(/^2 item\(s\) of the batch were applied but not confirmed/);
  });

  it('counts refused claims as not applied and short completions as applied', () => {
    // Arrange: completeAndClaimMany, one completion applied and one claim won (then refused).
    const releaseRefused = vi.fn();
    const handlers = shortfallHandlers(wait, releaseRefused);
    const won = { claimed: true, token: 7, attempt: 1, leaseUntil: 60_000 } as const;
    // Act
    const error = thrownBy(() =>
      handlers.completesAndClaims(
        { reply: 'ignored', replicas: 0 },
        () => ({ completed: [true], claimed: [won] }),
        ['EVALSHA', 'sha', '2', 'record:done', 'record:claimed'],
      ),
    );
    // Assert
    expect(releaseRefused).toHaveBeenCalledWith('record:claimed', won);
    expect([error.failed, error.unconfirmed]).toEqual([1, 1]);
    expect(error.message).toMatch(
      /^1 item\(s\) of the batch could not be applied; 1 other\(s\) were applied but not confirmed/,
    );
  });
});
