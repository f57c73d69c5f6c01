import { describe, expect, it } from 'vitest';
import {
  createIdempotency,
  type Duration,
  isInvalidOptionsError,
  memoryStore,
  toMs,
} from '../../../src/index.js';

describe('option checks', () => {
  it.each([
    [true, /got true/],
    [{}, /got an object/],
    [[], /got an array/],
    [10n, /got 10n/],
  ])(
    'refuses leaseMs %s, which is neither a number nor a string, with InvalidOptionsError',
    (value, shown) => {
      // Act / Assert: from the engine's options and from a single run alike
      const leaseMs = value as unknown as Duration;
      expect(() => createIdempotency({ store: memoryStore(), leaseMs })).toThrow(
        expect.objectContaining({ code: 'invalid_options', message: expect.stringMatching(shown) }),
      );
      expect(() => toMs(leaseMs, 'leaseMs')).toThrow(
        /^leaseMs: must be a number of ms or a string/,
      );
    },
  );

  it('refuses a non-duration leaseMs on run() too, before anything is claimed', async () => {
    const idempotency = createIdempotency({ store: memoryStore() });
    await expect(
      idempotency.run({ key: 'k', leaseMs: {} as unknown as Duration }, () => 1),
    ).rejects.toSatisfy(isInvalidOptionsError);
  });

  it.each([Number.NaN, 0, -1, 2.5, Number.POSITIVE_INFINITY])(
    'refuses cache.maxEntries %s: it must be a positive integer',
    (maxEntries) => {
      expect(() => createIdempotency({ store: memoryStore(), cache: { maxEntries } })).toThrow(
        expect.objectContaining({
          code: 'invalid_options',
          message: expect.stringMatching(/^cache\.maxEntries must be a positive integer/),
        }),
      );
    },
  );

  it('still takes a positive integer cache.maxEntries, or no cache', () => {
    expect(() =>
      createIdempotency({ store: memoryStore(), cache: { maxEntries: 1 } }),
    ).not.toThrow();
    expect(() => createIdempotency({ store: memoryStore(), cache: false })).not.toThrow();
  });
});
