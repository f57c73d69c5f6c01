/**
 * The consumers' options are checked, never coerced: a backoff field of another shape (the outbox relay's
 * names) is refused instead of ignored, and a value of the wrong type is shown with its type.
 */
import { describe, expect, it } from 'vitest';
import { createBackoff, resolveConsumerOptions } from '../../../src/consumer/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';

const idempotency = { store: memoryStore() };

/** Resolve a consumer's options with `extra` added, as an untyped caller (a config file) would. */
function resolve(extra: Record<string, unknown>) {
  return resolveConsumerOptions({ idempotency, name: 'billing', ...extra }, () => 'k');
}

function refusal(message: RegExp) {
  return expect.objectContaining({
    code: 'invalid_options',
    message: expect.stringMatching(message),
  });
}

describe('a consumer backoff of another shape', () => {
  it.each([
    ['initialMs', 'initial'],
    ['maxMs', 'max'],
    ['multiplier', 'factor'],
  ])(
    'refuses the relay field %s, naming the consumer field %s and the accepted ones',
    (field, here) => {
      // Arrange
      const backoff = { [field]: 100 };

      // Act / Assert
      expect(() => resolve({ backoff })).toThrow(
        refusal(
          new RegExp(
            `^backoff: unknown field "${field}" \\(the name the outbox relay uses; here it is \`${here}\`\\); the fields are initial, max, factor, jitter$`,
          ),
        ),
      );
    },
  );

  it('refuses any other unknown field (a typo would run the defaults)', () => {
    // Arrange / Act / Assert
    expect(() => resolve({ backoff: { intial: '5s' } })).toThrow(
      refusal(/^backoff: unknown field "intial"; the fields are initial, max, factor, jitter$/),
    );
    expect(() => createBackoff({ constructor: 1 } as never)).toThrow(
      refusal(/^backoff: unknown field "constructor"; the fields/),
    );
  });

  it('refuses the relay jitter (a fraction), and values of the wrong type, showing their type', () => {
    // Arrange / Act / Assert
    expect(() => resolve({ backoff: { jitter: 0.2 } })).toThrow(
      refusal(
        /^backoff\.jitter: expected true or false, got 0\.2 \(a fraction is the outbox relay's/,
      ),
    );
    expect(() => resolve({ backoff: { jitter: 'false' } })).toThrow(
      refusal(/^backoff\.jitter: expected true or false, got "false"$/),
    );
    expect(() => resolve({ backoff: { factor: '2' } })).toThrow(
      refusal(/^backoff\.factor: must be a number ≥ 1, got "2"$/),
    );
    expect(() => resolve({ backoff: { initial: true } })).toThrow(refusal(/^backoff\.initial: /));
    expect(() => resolve({ backoff: '1s' })).toThrow(
      refusal(
        /^backoff: expected \{ initial, max, factor, jitter \} or a function of the delivery count, got "1s"$/,
      ),
    );
  });

  it('still takes the documented shape, a function, or nothing', () => {
    // Arrange
    const exact = createBackoff({ initial: '100ms', max: 500, factor: 3, jitter: false });

    // Act / Assert
    expect([1, 2, 3].map(exact)).toEqual([100, 300, 500]);
    expect(resolve({ backoff: (count: number) => count }).policy.backoff(7)).toBe(7);
    expect(() => resolve({ backoff: null })).not.toThrow();
    expect(() => resolve({ backoff: undefined })).not.toThrow();
  });
});

describe('consumer counts', () => {
  it.each([
    ['maxDeliveries', '5', '"5"'],
    ['concurrency', '10', '"10"'],
    ['maxDeliveries', 0, '0'],
    ['concurrency', 2.5, '2.5'],
    ['concurrency', Number.NaN, 'NaN'],
  ])('refuses %s: %o, showing the value with its type (%s)', (option, value, shown) => {
    // Arrange
    const escaped = shown.replace(/[.]/g, '\\.');

    // Act / Assert
    expect(() => resolve({ [option]: value })).toThrow(
      refusal(new RegExp(`^${option}: must be a positive integer, got ${escaped}$`)),
    );
  });

  it('still takes positive integers, and the defaults when absent or null', () => {
    // Arrange / Act
    const given = resolve({ maxDeliveries: 3, concurrency: 4 });
    const absent = resolve({ maxDeliveries: null, concurrency: undefined });

    // Assert
    expect([given.policy.maxDeliveries, given.concurrency]).toEqual([3, 4]);
    expect([absent.policy.maxDeliveries, absent.concurrency]).toEqual([5, 10]);
  });
});

describe('consumer drainTimeout', () => {
  it.each([
    ['30d', '"30d"'],
    [2 ** 31, String(2 ** 31)],
  ])('refuses %o, longer than a timer can wait (close() would give up at once)', (value, shown) => {
    // Act / Assert
    expect(() => resolve({ drainTimeout: value })).toThrow(
      refusal(
        new RegExp(
          `^drainTimeout: expected a positive number of ms \\(at most 2147483647 ms\\) or a duration like '500ms' or '30s', got ${shown}$`,
        ),
      ),
    );
  });

  it('takes up to 2^31-1 ms, and 30 s when absent', () => {
    // Act / Assert
    expect(resolve({ drainTimeout: '24d' }).drainTimeoutMs).toBe(24 * 86_400_000);
    expect(resolve({ drainTimeout: 2 ** 31 - 1 }).drainTimeoutMs).toBe(2 ** 31 - 1);
    expect(resolve({}).drainTimeoutMs).toBe(30_000);
  });
});

describe('consumer storeTimeout', () => {
  it.each([
    ['30d', '"30d"'],
    [2 ** 31, String(2 ** 31)],
    [0, '0'],
    ['5000', '"5000"'],
    [Number.NaN, 'NaN'],
  ])('refuses %o (a timer cannot wait that long, or it is no duration)', (value, shown) => {
    // Act / Assert
    expect(() => resolve({ storeTimeout: value })).toThrow(
      refusal(
        new RegExp(
          `^storeTimeout: expected a positive number of ms \\(at most 2147483647 ms\\) or a duration like '500ms' or '30s', got ${shown}`,
        ),
      ),
    );
  });

  it('defaults to the lease: the consumer’s, else the engine options’, else 30 s; capped at a timer’s limit', () => {
    // Act / Assert
    expect(resolve({ storeTimeout: '2s' }).storeTimeoutMs).toBe(2000);
    expect(resolve({ lease: '5s' }).storeTimeoutMs).toBe(5000);
    expect(
      resolveConsumerOptions(
        { idempotency: { store: memoryStore(), leaseMs: '7s' }, name: 'billing' },
        () => 'k',
      ).storeTimeoutMs,
    ).toBe(7000);
    expect(resolve({}).storeTimeoutMs).toBe(30_000);
    expect(
      resolveConsumerOptions(
        {
          idempotency: createIdempotency({ store: memoryStore(), leaseMs: '9s' }),
          name: 'billing',
        },
        () => 'k',
      ).storeTimeoutMs,
    ).toBe(30_000);
    expect(resolve({ lease: '60d' }).storeTimeoutMs).toBe(2 ** 31 - 1);
  });
});

describe('consumer brokerTimeout', () => {
  it.each([
    ['30d', '"30d"'],
    [2 ** 31, String(2 ** 31)],
    [0, '0'],
    ['5000', '"5000"'],
  ])('refuses %o (a timer cannot wait that long, or it is no duration)', (value, shown) => {
    // Act / Assert
    expect(() => resolve({ brokerTimeout: value })).toThrow(
      refusal(
        new RegExp(
          `^brokerTimeout: expected a positive number of ms \\(at most 2147483647 ms\\) or a duration like '500ms' or '30s', got ${shown}`,
        ),
      ),
    );
  });

  it('defaults to storeTimeout, itself the lease by default', () => {
    // Act / Assert
    expect(resolve({ brokerTimeout: '3s' }).brokerTimeoutMs).toBe(3000);
    expect(resolve({ storeTimeout: '2s' }).brokerTimeoutMs).toBe(2000);
    expect(resolve({ lease: '5s' }).brokerTimeoutMs).toBe(5000);
    expect(resolve({}).brokerTimeoutMs).toBe(30_000);
    expect(resolve({ lease: '60d' }).brokerTimeoutMs).toBe(2 ** 31 - 1);
  });
});
