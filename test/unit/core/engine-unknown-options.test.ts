/**
 * An option `createIdempotency` does not have was ignored in silence: `leasMs: '30s'` (a typo) ran with the
 * default lease, the setting its author believed in never applied. Refused at creation, naming the option
 * and the accepted ones.
 */
import { describe, expect, it } from 'vitest';
import { resolveConsumerOptions } from '../../../src/consumer/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';

const invalid = (message: RegExp) =>
  expect.objectContaining({ code: 'invalid_options', message: expect.stringMatching(message) });

describe('createIdempotency: unknown options', () => {
  it('refuses a misspelt option, naming it and listing the accepted ones', () => {
    // Act / Assert
    expect(() =>
      createIdempotency({ store: memoryStore(), leasMs: '30s' } as unknown as Parameters<
        typeof createIdempotency
      >[0]),
    ).toThrow(invalid(/"leasMs".*store, namespace, leaseMs, retentionMs/));
  });

  it('refuses an option of the HTTP layer given to the engine', () => {
    expect(() =>
      createIdempotency({ store: memoryStore(), key: 'required' } as unknown as Parameters<
        typeof createIdempotency
      >[0]),
    ).toThrow(invalid(/createIdempotency: unknown field "key"/));
  });

  it("refuses it in a consumer's `idempotency` options too", () => {
    expect(() =>
      resolveConsumerOptions(
        {
          name: 'orders',
          idempotency: { store: memoryStore(), leasMs: '30s' } as unknown as Parameters<
            typeof createIdempotency
          >[0],
        },
        () => 'k',
      ),
    ).toThrow(invalid(/"leasMs"/));
  });

  it('accepts every option it has, and null or undefined as not given', () => {
    // Arrange: each option of IdempotencyOptions, absent
    const absent = {
      namespace: null,
      leaseMs: undefined,
      retentionMs: null,
      extendLease: null,
      maxExecution: undefined,
      failOpen: null,
      storeErrors: null,
      batch: null,
      cache: null,
      codec: null,
      hooks: null,
      clock: undefined,
    };
    // Act / Assert
    const engine = createIdempotency({
      store: memoryStore(),
      ...absent,
    } as unknown as Parameters<typeof createIdempotency>[0]);
    expect(engine.namespace).toBe('default');
  });
});
