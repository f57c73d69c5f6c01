import { describe, expect, it } from 'vitest';
import { isInvalidOptionsError } from '../../../src/core/errors.js';
import { createRelay, type OutboxMessage } from '../../../src/outbox/index.js';
import { memorySource } from '../../helpers/outbox-memory-source.js';
import { recordingPublisher } from '../../helpers/outbox-recorder.js';

describe('createRelay', () => {
  it('marks exactly the published rows sent, by id, and gives failed rows a backoff from their attempt number', async () => {
    // Arrange
    const source = memorySource();
    for (const id of ['a', 'b', 'c']) source.add(id);
    const publisher = {
      async publish(message: OutboxMessage) {
        if (message.id === 'b') throw new Error('nope');
      },
    };
    const relay = createRelay({ source, publisher, backoff: (attempt) => attempt * 1000 });

    // Act
    const result = await relay.runOnce();

    // Assert
    expect(result).toEqual({ claimed: 3, published: 2, failed: 1, deferred: 0 });
    expect(source.calls).toContain('markSent 1,3');
    expect(source.calls).toContain('markFailed 2 1000');
    expect(source.rows.map((row) => [row.message.id, row.sentAt !== null, row.lastError])).toEqual([
      ['a', true, null],
      ['b', false, 'Error: nope'],
      ['c', true, null],
    ]);
  });

  it('drains every available row in batches and stops at the first empty claim', async () => {
    // Arrange
    const source = memorySource();
    for (let i = 0; i < 25; i++) source.add(`m${i}`);
    const publisher = recordingPublisher();
    const relay = createRelay({ source, publisher, batchSize: 10 });

    // Act
    const total = await relay.drain();

    // Assert
    expect(total).toEqual({ claimed: 25, published: 25, failed: 0, deferred: 0 });
    expect(source.calls.filter((call) => call.startsWith('claim'))).toHaveLength(4);
    expect([...publisher.counts.values()].every((count) => count === 1)).toBe(true);
  });

  it('counts a publish that is not confirmed within publishTimeoutMs as failed', async () => {
    // Arrange
    const source = memorySource();
    source.add('hung');
    const relay = createRelay({
      source,
      publisher: { publish: () => new Promise<void>(() => {}) },
      publishTimeoutMs: 50,
      leaseMs: 1000,
    });

    // Act
    const result = await relay.runOnce();

    // Assert
    expect(result).toMatchObject({ failed: 1, published: 0 });
    expect(source.rows[0]?.lastError).toMatch(/not confirmed within 50 ms/);
  });

  it('does not start a publish that could outlast the lease, leaving the row for after it', async () => {
    // Arrange
    const source = memorySource();
    source.add('first');
    source.add('second');
    const publisher = recordingPublisher({ delayMs: 600 });
    const relay = createRelay({
      source,
      publisher,
      concurrency: 1,
      leaseMs: 1500,
      publishTimeoutMs: 1000,
    });

    // Act
    const result = await relay.runOnce();

    // Assert
    expect(result).toEqual({ claimed: 2, published: 1, failed: 0, deferred: 1 });
    expect(source.rows[1]?.sentAt).toBeNull();
    expect(publisher.calls.has('second')).toBe(false);
  });

  it('reports source failures to onError and keeps running', async () => {
    // Arrange
    const source = memorySource();
    const errors: unknown[] = [];
    let fail = 2;
    const claim = source.claim;
    source.claim = async (limit, leaseMs) => {
      if (fail-- > 0) throw new Error('database down');
      return claim(limit, leaseMs);
    };
    source.add('after-outage');
    const publisher = recordingPublisher();
    const relay = createRelay({
      source,
      publisher,
      pollIntervalMs: 10,
      errorDelayMs: 10,
      onError: (e) => errors.push(e),
    });

    // Act
    relay.start();
    relay.start(); // idempotent
    for (let i = 0; i < 200 && !publisher.counts.has('after-outage'); i++)
      await new Promise((r) => setTimeout(r, 10));
    await relay.stop();

    // Assert
    expect(errors).toHaveLength(2);
    expect(publisher.counts.get('after-outage')).toBe(1);
    expect(relay.running).toBe(false);
  });

  it('ignores async hooks that reject: no unhandled rejection, the round unchanged', async () => {
    // Arrange
    const unhandled: unknown[] = [];
    const record = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', record);
    const source = memorySource();
    for (const id of ['a', 'b']) source.add(id);
    const publisher = {
      async publish(message: OutboxMessage) {
        if (message.id === 'b') throw new Error('nope');
      },
    };
    const relay = createRelay({
      source,
      publisher,
      onPublished: (async () => {
        throw new Error('metrics down');
      }) as () => void,
      onPublishFailed: (() => Promise.reject(new Error('log sink down'))) as () => void,
    });
    try {
      // Act
      const result = await relay.runOnce();
      await new Promise((resolve) => setTimeout(resolve, 20));
      // Assert
      expect(result).toEqual({ claimed: 2, published: 1, failed: 1, deferred: 0 });
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', record);
    }
  });

  it('refuses options that would let a publish outlast its lease, and bad sizes', () => {
    // Arrange
    const base = { source: memorySource(), publisher: recordingPublisher() };

    // Act / Assert
    expect(() => createRelay({ ...base, leaseMs: 1000, publishTimeoutMs: 1000 })).toThrow(
      expect.toSatisfy(isInvalidOptionsError),
    );
    expect(() => createRelay({ ...base, batchSize: 0 })).toThrow(
      expect.toSatisfy(isInvalidOptionsError),
    );
    expect(() => createRelay({ ...base, publisher: {} as never })).toThrow(
      expect.toSatisfy(isInvalidOptionsError),
    );
  });
});
