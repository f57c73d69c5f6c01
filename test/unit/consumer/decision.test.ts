import { describe, expect, it } from 'vitest';
import { createBackoff, type DecisionPolicy, decide } from '../../../src/consumer/index.js';
import { MAX_DURATION_MS, ReplayedError, StoreUnavailableError } from '../../../src/index.js';

const policy: DecisionPolicy = {
  maxDeliveries: 3,
  backoff: (count) => count * 100,
  minRetryDelayMs: 100,
  maxRetryDelayMs: 30_000,
  isPermanentError: (error) => error instanceof TypeError,
};

describe('consumer decision policy', () => {
  it('acks an executed message', () => {
    // Arrange / Act
    const decision = decide({ kind: 'executed' }, 1, policy);
    // Assert
    expect(decision).toEqual({ action: 'ack', reason: 'executed' });
  });

  it('acks a duplicate of a completed message, on any delivery', () => {
    // Arrange / Act
    const decisions = [1, 3, 99].map((count) => decide({ kind: 'replayed' }, count, policy));
    // Assert
    for (const decision of decisions)
      expect(decision).toEqual({ action: 'ack', reason: 'duplicate' });
  });

  it('never acks nor dead-letters a message in progress elsewhere, even past maxDeliveries', () => {
    // Arrange / Act
    const decision = decide({ kind: 'in_progress', retryAfterMs: 5000 }, 50, policy);
    // Assert
    expect(decision).toMatchObject({ action: 'retry', reason: 'in_progress' });
  });

  it('redelivers an in-progress duplicate soon at first, then no later than just after the lease', () => {
    // Arrange / Act
    const delays = [1, 2, 3, 10].map(
      (count) =>
        (decide({ kind: 'in_progress', retryAfterMs: 2000 }, count, policy) as { delayMs: number })
          .delayMs,
    );
    // Assert
    expect(delays).toEqual([100, 200, 400, 2050]);
  });

  it('redelivers later when the store is unavailable, using its Retry-After, never dead-lettering', () => {
    // Arrange
    const error = new StoreUnavailableError('down', { retryAfterMs: 1500 });
    // Act
    const decision = decide({ kind: 'store_unavailable', error, retryAfterMs: 1500 }, 10, policy);
    // Assert
    expect(decision).toEqual({
      action: 'retry',
      reason: 'store_unavailable',
      delayMs: 1500,
      error,
    });
  });

  it('retries a handler error with backoff while deliveries remain', () => {
    // Arrange
    const error = new Error('boom');
    // Act
    const decision = decide({ kind: 'handler_error', error }, 2, policy);
    // Assert
    expect(decision).toEqual({ action: 'retry', reason: 'handler_error', delayMs: 200, error });
  });

  it('dead-letters a handler error on the last allowed delivery, with the error recorded', () => {
    // Arrange
    const error = Object.assign(new Error('card declined'), { code: 'E_DECLINED' });
    // Act
    const decision = decide({ kind: 'handler_error', error }, 3, policy);
    // Assert
    expect(decision).toEqual({
      action: 'dead_letter',
      reason: 'handler_error',
      error: { name: 'Error', message: 'card declined', code: 'E_DECLINED' },
    });
  });

  it('dead-letters a permanent error on its first delivery', () => {
    // Arrange / Act
    const decision = decide({ kind: 'handler_error', error: new TypeError('bad') }, 1, policy);
    // Assert
    expect(decision).toMatchObject({ action: 'dead_letter', reason: 'handler_error' });
  });

  it('dead-letters a key reused with another payload, and a message without a usable key', () => {
    // Arrange / Act
    const mismatch = decide({ kind: 'mismatch' }, 1, policy);
    const noKey = decide({ kind: 'invalid_key', error: new Error('no key') }, 1, policy);
    // Assert
    expect(mismatch).toMatchObject({ action: 'dead_letter', reason: 'mismatch' });
    expect(noKey).toMatchObject({
      action: 'dead_letter',
      reason: 'invalid_key',
      error: { message: 'no key' },
    });
  });

  it('redelivers after a lost lease so the redelivery is settled against whoever completed', () => {
    // Arrange / Act
    const decision = decide({ kind: 'lease_lost', error: new Error('lost') }, 1, policy);
    // Assert
    expect(decision).toMatchObject({ action: 'retry', reason: 'lease_lost', delayMs: 100 });
  });

  it('dead-letters at once, with the error recorded, a stored error record (never acks it)', () => {
    // Arrange
    const error = new ReplayedError({ name: 'Error', message: 'gateway timeout' });
    // Act
    const decision = decide({ kind: 'replayed_error', error }, 1, policy);
    // Assert
    expect(decision).toEqual({
      action: 'dead_letter',
      reason: 'handler_error',
      error: {
        name: 'ReplayedError',
        message: 'Replayed stored error: Error: gateway timeout',
        code: 'replayed_error',
      },
    });
  });
});

describe('consumer backoff', () => {
  it('grows exponentially up to the maximum without jitter', () => {
    // Arrange
    const backoff = createBackoff({ initial: 100, factor: 2, max: 500, jitter: false });
    // Act
    const delays = [1, 2, 3, 4, 5].map(backoff);
    // Assert
    expect(delays).toEqual([100, 200, 400, 500, 500]);
  });

  it('keeps jittered delays between half and all of the exponential delay', () => {
    // Arrange
    const low = createBackoff({ initial: 1000 }, () => 0);
    const high = createBackoff({ initial: 1000 }, () => 1);
    // Act / Assert
    expect(low(2)).toBe(1000);
    expect(high(2)).toBe(2000);
  });

  it.each([
    ['NaN', Number.NaN],
    ['a negative delay', -1],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['more than 100 years', 1e21],
    ['a string', '5000'],
  ])('refuses a function answer of %s, when it is asked, naming the delivery', (_name, answer) => {
    // Arrange
    const backoff = createBackoff(() => answer as number);
    // Act / Assert
    expect(() => backoff(2)).toThrow(
      expect.objectContaining({
        code: 'invalid_options',
        message: expect.stringMatching(
          /^backoff: the function answered .+ for delivery 2; expected a number of ms from 0 to 100 years$/,
        ),
      }),
    );
  });

  it('takes a function answer from 0 to 100 years as it is', () => {
    // Arrange
    const answers = [0, 1.5, 250, MAX_DURATION_MS];
    // Act / Assert
    for (const answer of answers) expect(createBackoff(() => answer)(1)).toBe(answer);
  });
});
