/**
 * The relay's and the outbox's options are checked, never coerced: a backoff field of another shape (a
 * consumer's names) is refused instead of ignored, a value of the wrong type is shown with its type, and
 * the relay's durations take the engine's duration strings (`leaseMs: '30s'`), as the engine's own do.
 */
import { describe, expect, it } from 'vitest';
import {
  createRelay,
  exponentialBackoff,
  postgresOutboxSource,
  type RelayOptions,
  redisStreamsPublisher,
} from '../../../src/outbox/index.js';
import { memorySource } from '../../helpers/outbox-memory-source.js';
import { recordingPublisher } from '../../helpers/outbox-recorder.js';

function refusal(message: RegExp) {
  return expect.objectContaining({
    code: 'invalid_options',
    message: expect.stringMatching(message),
  });
}

/** Create a relay over a memory source with `extra` added, as an untyped caller (a config file) would. */
function relayWith(extra: Record<string, unknown>) {
  const source = memorySource();
  const relay = createRelay({
    source,
    publisher: recordingPublisher(),
    ...extra,
  } as RelayOptions);
  return { source, relay };
}

describe('a relay backoff of another shape', () => {
  it("refuses a consumer's field names, naming the relay's and the accepted ones", () => {
    // Arrange: each consumer name and the relay's name for the same setting.
    const renamed = { initial: 'initialMs', max: 'maxMs', factor: 'multiplier' };
    const fields = 'the fields are initialMs, maxMs, multiplier, jitter';

    // Act
    const messages = Object.keys(renamed).map((field) => {
      try {
        relayWith({ backoff: { [field]: 100 } });
        return 'accepted';
      } catch (error) {
        return (error as Error).message;
      }
    });

    // Assert
    expect(messages).toEqual(
      Object.entries(renamed).map(
        ([field, here]) =>
          `backoff: unknown field "${field}" (the name a consumer's backoff uses; here it is \`${here}\`); ${fields}`,
      ),
    );
  });

  it('refuses a consumer jitter (true or false), and values of the wrong type, showing their type', () => {
    // Arrange / Act / Assert
    expect(() => exponentialBackoff({ jitter: true } as never)).toThrow(
      refusal(
        /^backoff\.jitter: must be a fraction in \[0, 1\], got true \(true or false is a consumer's jitter\)$/,
      ),
    );
    expect(() => exponentialBackoff({ multiplier: '2' } as never)).toThrow(
      refusal(/^backoff\.multiplier: must be a number >= 1, got "2"$/),
    );
    // A string of digits used to be multiplied as a number; a duration string needs its unit.
    expect(() => exponentialBackoff({ initialMs: '1000' } as never)).toThrow(
      refusal(
        /^backoff\.initialMs: must be a non-negative number of ms of at most 100 years or a duration like '30s', got "1000"$/,
      ),
    );
    expect(() => relayWith({ backoff: 5000 })).toThrow(
      refusal(
        /^backoff: expected \{ initialMs, maxMs, multiplier, jitter \} or a function of the attempt, got 5000$/,
      ),
    );
  });

  it('takes its documented fields, in ms or as duration strings', () => {
    // Arrange
    const inMs = exponentialBackoff({ initialMs: 100, maxMs: 1000, multiplier: 3, jitter: 0 });
    const asStrings = exponentialBackoff({
      initialMs: '100ms',
      maxMs: '1s',
      multiplier: 3,
      jitter: 0,
    });

    // Act / Assert
    expect([1, 2, 3, 4].map(inMs)).toEqual([100, 300, 900, 1000]);
    expect([1, 2, 3, 4].map(asStrings)).toEqual([100, 300, 900, 1000]);
  });
});

describe('the relay durations', () => {
  it('take the engine duration strings: leaseMs "30s" is a 30 000 ms lease', async () => {
    // Arrange
    const { source, relay } = relayWith({
      leaseMs: '30s',
      publishTimeoutMs: '10s',
      pollIntervalMs: '2s',
    });
    source.add('a');

    // Act
    await relay.runOnce();

    // Assert
    expect(source.calls[0]).toBe('claim 100 30000');
  });

  it.each([
    [
      { leaseMs: '30' },
      /^createRelay: leaseMs: must be a positive number of ms of at most 100 years or a duration like '30s', got "30"$/,
    ],
    // Past 100 years, a number reached PostgreSQL as `interval out of range`, reported like an outage.
    [
      { leaseMs: 1e20 },
      /^createRelay: leaseMs: must be a positive number of ms of at most 100 years or a duration like '30s', got 100000000000000000000$/,
    ],
    [
      { retentionMs: 1e20 },
      /^createRelay: retentionMs: .* of at most 100 years .*, got 100000000000000000000$/,
    ],
    [{ leaseMs: 0 }, /^createRelay: leaseMs: must be a positive number of ms .*, got 0$/],
    [
      { pollIntervalMs: '30d' },
      /^createRelay: pollIntervalMs: must be a positive number of ms of at most 2147483647 or a duration like '30s', got "30d"$/,
    ],
    [
      { retentionMs: true },
      /^createRelay: retentionMs: must be a non-negative number of ms .*, got true$/,
    ],
    [{ errorDelayMs: Number.NaN }, /^createRelay: errorDelayMs: .*, got NaN$/],
  ])('refuse %o, showing the value with its type', (bad, message) => {
    // Arrange / Act / Assert
    expect(() => relayWith(bad)).toThrow(refusal(message));
  });

  it('still take 0 where 0 means off or no wait', () => {
    // Arrange / Act / Assert
    expect(() => relayWith({ purgeIntervalMs: 0, retentionMs: 0, errorDelayMs: 0 })).not.toThrow();
  });
});

describe('outbox counts and numbers show the value with its type', () => {
  it.each([
    [{ batchSize: '100' }, /^createRelay: batchSize: must be a positive integer, got "100"$/],
    [{ concurrency: '10' }, /^createRelay: concurrency: must be a positive integer, got "10"$/],
    [
      { purgeBatchSize: 0.5 },
      /^createRelay: purgeBatchSize: must be a positive integer, got 0\.5$/,
    ],
  ])('createRelay refuses %o', (bad, message) => {
    // Arrange / Act / Assert
    expect(() => relayWith(bad)).toThrow(refusal(message));
  });

  it('redisStreamsPublisher refuses a maxLen string, and postgresOutboxSource a reconnectDelayMs string', () => {
    // Arrange: stand-ins with the methods the factories look for; nothing is sent.
    const client = { sendCommand: async () => '1-0' } as never;
    const pool = { query: async () => ({ rows: [] }) } as never;

    // Act / Assert
    expect(() => redisStreamsPublisher({ client, maxLen: '1000' as never })).toThrow(
      refusal(/^redisStreamsPublisher: maxLen: must be a positive integer, got "1000"$/),
    );
    expect(() =>
      postgresOutboxSource({ pool, listen: false, reconnectDelayMs: '1000' as never }),
    ).toThrow(
      refusal(/reconnectDelayMs must be a non-negative number of milliseconds, got "1000"$/),
    );
  });
});
