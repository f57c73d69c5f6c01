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

  it('drain() ends when only rows it already tried come back, none published (a zero backoff used to spin for ever)', async () => {
    // Arrange: a row that always fails, a backoff of 0 (usual in tests), and good rows around it.
    const source = memorySource();
    for (const id of ['good-1', 'bad', 'good-2', 'good-3']) source.add(id);
    const attempts = new Map<string, number>();
    const publisher = {
      async publish(message: OutboxMessage) {
        attempts.set(message.id, (attempts.get(message.id) ?? 0) + 1);
        // A broker round trip: lets timers run even while drain() loops.
        await new Promise((resolve) => setImmediate(resolve));
        if (message.id === 'bad') throw new Error('poison');
      },
    };
    const relay = createRelay({ source, publisher, batchSize: 2, backoff: () => 0 });

    // Act: before, drain() claimed the failing row again and again and never resolved.
    const total = await Promise.race([
      relay.drain(),
      new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 2000)),
    ]);

    // Assert: every good row published once; the bad one tried again only while new rows came with it
    // (three rounds with a new row, then one with only the bad row: the end).
    expect(total).not.toBe('hung');
    expect(total).toMatchObject({ published: 3 });
    expect([attempts.get('good-1'), attempts.get('good-2'), attempts.get('good-3')]).toEqual([
      1, 1, 1,
    ]);
    expect(attempts.get('bad')).toBe(4);
    expect(source.rows.find((row) => row.message.id === 'bad')?.sentAt).toBeNull();
  });

  it('waits a poll interval before claiming again the rows of a full batch that all failed with a zero backoff', async () => {
    // Arrange: batchSize 1, so the failing row fills the claim alone and the loop claims again at once.
    // Before, with a zero backoff it was claimable at once, first in claim order: the loop claimed it
    // without a pause, for ever, and the row behind it was never claimed.
    const source = memorySource();
    for (const id of ['bad', 'good']) source.add(id);
    const publisher = {
      published: [] as string[],
      async publish(message: OutboxMessage) {
        // A broker round trip: lets timers run (stop() included) while the old loop spun.
        await new Promise((resolve) => setImmediate(resolve));
        if (message.id === 'bad') throw new Error('poison');
        publisher.published.push(message.id);
      },
    };
    const relay = createRelay({
      source,
      publisher,
      batchSize: 1,
      backoff: () => 0,
      pollIntervalMs: 60_000,
      purgeIntervalMs: 0,
    });

    // Act
    relay.start();
    await new Promise((resolve) => setTimeout(resolve, 200));
    await relay.stop();

    // Assert: bad (its delay raised to the poll interval), good, then an empty claim and the poll sleep.
    expect(source.calls.filter((call) => call.startsWith('claim'))).toHaveLength(3);
    expect(source.calls).toContain('markFailed 1 60000');
    expect(publisher.published).toEqual(['good']);
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

  it('refuses fractional counts instead of flooring them to 0 (a spinning loop, rows claimed and never published, an endless purge)', () => {
    // Arrange
    const base = { source: memorySource(), publisher: recordingPublisher() };

    // Act / Assert
    for (const bad of [
      { batchSize: 0.5 },
      { concurrency: 0.5 },
      { purgeBatchSize: 0.5 },
      { batchSize: 2.5 },
      { concurrency: Number.NaN },
    ]) {
      expect(() => createRelay({ ...base, ...bad })).toThrow(
        expect.toSatisfy(isInvalidOptionsError),
      );
    }
  });

  it('refuses timers Node cannot arm (they would fire at once) and a lease with no room for the claim', () => {
    // Arrange
    const base = { source: memorySource(), publisher: recordingPublisher() };

    // Act / Assert
    expect(() => createRelay({ ...base, pollIntervalMs: 2 ** 31 })).toThrow(
      expect.toSatisfy(isInvalidOptionsError),
    );
    expect(() => createRelay({ ...base, errorDelayMs: 2 ** 31 })).toThrow(
      expect.toSatisfy(isInvalidOptionsError),
    );
    expect(() => createRelay({ ...base, leaseMs: 1000, publishTimeoutMs: 999 })).toThrow(
      expect.toSatisfy(isInvalidOptionsError),
    );
    // A long retention is not a timer: 30 days is fine.
    expect(() => createRelay({ ...base, retentionMs: 30 * 24 * 3600_000 })).not.toThrow();
  });

  it('reports a round that had to defer every row it claimed, instead of looking idle', async () => {
    // Arrange: the claim eats the lease's slack, so no publish may start.
    const source = memorySource();
    source.add('late');
    const claim = source.claim;
    source.claim = async (limit, leaseMs) => {
      await new Promise((resolve) => setTimeout(resolve, 150));
      return claim(limit, leaseMs);
    };
    const errors: unknown[] = [];
    const relay = createRelay({
      source,
      publisher: recordingPublisher(),
      leaseMs: 1000,
      publishTimeoutMs: 900,
      onError: (error) => errors.push(error),
    });

    // Act
    const result = await relay.runOnce();

    // Assert
    expect(result).toEqual({ claimed: 1, published: 0, failed: 0, deferred: 1 });
    expect(errors).toHaveLength(1);
    expect(String(errors[0])).toMatch(/deferred all 1 claimed rows/);
  });

  it('keeps running after start() is called while a stop() is still winding down', async () => {
    // Arrange
    const source = memorySource();
    const publisher = recordingPublisher();
    const relay = createRelay({ source, publisher, pollIntervalMs: 10 });
    relay.start();
    await new Promise((resolve) => setTimeout(resolve, 20));

    // Act: a restart that does not await stop()
    const stopped = relay.stop();
    relay.start();
    await stopped;
    source.add('after-restart');
    for (let i = 0; i < 200 && !publisher.counts.has('after-restart'); i++)
      await new Promise((resolve) => setTimeout(resolve, 10));

    // Assert
    expect(relay.running).toBe(true);
    expect(publisher.counts.get('after-restart')).toBe(1);
    await relay.stop();
    expect(relay.running).toBe(false);
  });

  it('replaces a backoff result that is not a finite, non-negative delay by the default one, and reports it', async () => {
    // Arrange
    const source = memorySource();
    for (const id of ['a', 'b']) source.add(id);
    const errors: unknown[] = [];
    const relay = createRelay({
      source,
      publisher: {
        async publish() {
          throw new Error('broker down');
        },
      },
      backoff: () => Number.NaN,
      onError: (error) => errors.push(error),
    });

    // Act
    const result = await relay.runOnce();

    // Assert: both failures recorded with a usable delay (default: about 1 s after the first attempt).
    expect(result).toMatchObject({ claimed: 2, failed: 2 });
    for (const row of source.rows) {
      expect(row.lastError).toBe('Error: broker down');
      expect(row.availableAt - Date.now()).toBeGreaterThan(500);
      expect(row.availableAt - Date.now()).toBeLessThanOrEqual(1000);
    }
    expect(errors.length).toBe(2);
    expect(errors.every(isInvalidOptionsError)).toBe(true);
  });

  it('leaves time for the mark: a second relay claiming at lease end does not re-publish rows the first one confirmed', async () => {
    // Arrange: a loaded database takes 100 ms to mark; the first publish ends well inside the lease, the
    // second one would end right at its end.
    const source = memorySource();
    for (const id of ['r1', 'r2']) source.add(id);
    const markSent = source.markSent;
    source.markSent = async (rowIds) => {
      await new Promise((resolve) => setTimeout(resolve, 100));
      return markSent(rowIds);
    };
    const publisher = recordingPublisher({ delayMs: 470 });
    const options = { source, publisher, leaseMs: 1000, publishTimeoutMs: 500, concurrency: 1 };
    const first = createRelay(options);
    const second = createRelay(options);

    // Act
    const firstRound = first.runOnce();
    await new Promise((resolve) => setTimeout(resolve, 1010)); // the first claim's lease has ended
    const secondRound = await second.runOnce();

    // Assert
    expect(await firstRound).toEqual({ claimed: 2, published: 1, failed: 0, deferred: 1 });
    expect(secondRound).toMatchObject({ published: 1 });
    expect(publisher.counts).toEqual(
      new Map([
        ['r1', 1],
        ['r2', 1],
      ]),
    );
  });

  it('marks again when the mark fails once, so the confirmed rows are not all published again after the lease', async () => {
    // Arrange: the database drops the connection during the first mark.
    const source = memorySource();
    for (const id of ['m1', 'm2']) source.add(id);
    const markSent = source.markSent;
    let marks = 0;
    source.markSent = async (rowIds) => {
      marks++;
      if (marks === 1) throw new Error('Connection terminated unexpectedly');
      return markSent(rowIds);
    };
    const publisher = recordingPublisher();
    const errors: unknown[] = [];
    const relay = createRelay({
      source,
      publisher,
      leaseMs: 1000,
      publishTimeoutMs: 500,
      onError: (e) => errors.push(e),
    });

    // Act
    const result = await relay.runOnce();

    // Assert: marked on the second try, the failure reported, and nothing left to publish again.
    expect(result).toMatchObject({ claimed: 2, published: 2 });
    expect(marks).toBe(2);
    expect(errors.map(String)).toEqual(['Error: Connection terminated unexpectedly']);
    expect(source.rows.every((row) => row.sentAt !== null)).toBe(true);
  });

  it('records and reports every failure of the round although the mark failed for good', async () => {
    // Arrange: the mark fails on every try; two rows of the batch failed to publish.
    const source = memorySource();
    for (const id of ['ok', 'bad-1', 'bad-2']) source.add(id);
    source.markSent = async () => {
      throw new Error('Connection terminated unexpectedly');
    };
    const publisher = {
      async publish(message: OutboxMessage) {
        if (message.id.startsWith('bad')) throw new Error(`refused ${message.id}`);
      },
    };
    const reported: Array<[string, number]> = [];
    const relay = createRelay({
      source,
      publisher,
      backoff: () => 5000,
      leaseMs: 1000,
      publishTimeoutMs: 500,
      onPublishFailed: (message, _error, retryInMs) => reported.push([message.id, retryInMs]),
    });

    // Act: before, the round ended with the mark's error: neither failure was recorded or reported,
    // and both rows came back after the lease instead of the backoff.
    const round = relay.runOnce();

    // Assert: the round still fails with the mark's error, after recording both failures.
    await expect(round).rejects.toThrow('Connection terminated unexpectedly');
    expect(reported).toEqual([
      ['bad-1', 5000],
      ['bad-2', 5000],
    ]);
    expect(source.calls.filter((call) => call.startsWith('markFailed'))).toEqual([
      'markFailed 2 5000',
      'markFailed 3 5000',
    ]);
    expect(source.rows.map((row) => row.lastError)).toEqual([
      null,
      'Error: refused bad-1',
      'Error: refused bad-2',
    ]);
  });

  it('records and reports the other failures of the round when recording one of them throws', async () => {
    // Arrange: the record of the first failure throws (a dropped connection); three rows failed.
    const source = memorySource();
    for (const id of ['bad-1', 'bad-2', 'bad-3']) source.add(id);
    const markFailed = source.markFailed;
    let records = 0;
    source.markFailed = async (...args) => {
      records++;
      if (records === 1) throw new Error('Connection terminated unexpectedly');
      return markFailed(...args);
    };
    const publisher = {
      async publish(message: OutboxMessage) {
        throw new Error(`refused ${message.id}`);
      },
    };
    const reported: string[] = [];
    const relay = createRelay({
      source,
      publisher,
      backoff: () => 5000,
      onPublishFailed: (message) => reported.push(message.id),
    });

    // Act: before, the round ended at the first record: bad-2 and bad-3 were neither recorded nor
    // reported, and bad-1's failure was not reported either.
    const round = relay.runOnce();

    // Assert: the round fails with the record's error, every failure reported, the others recorded.
    await expect(round).rejects.toThrow('Connection terminated unexpectedly');
    expect(reported).toEqual(['bad-1', 'bad-2', 'bad-3']);
    expect(records).toBe(3);
    expect(source.rows.map((row) => row.lastError)).toEqual([
      null,
      'Error: refused bad-2',
      'Error: refused bad-3',
    ]);
  });
});
