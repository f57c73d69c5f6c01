/**
 * A `'turn'` batch window (the SQLite store's, the memory store's while the event loop is busy) is
 * scheduled with the event loop's own `setImmediate`: a test's fake timers, which fake `setImmediate` by
 * default in vitest, must not hold the store calls back until the test advances a clock it never advances
 * for them (the run would never end).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { busyEventLoop } from '../../helpers/event-loop.js';

afterEach(() => {
  vi.useRealTimers();
});

describe("a 'turn' batch window under a test's fake timers", () => {
  it('still sends the memory store’s calls while the event loop is busy', async () => {
    // Arrange: a busy loop (before the fakes: the spin reads the real clock), then vitest's default
    // fakes, setImmediate and performance included (the gauge keeps its busy verdict).
    const idempotency = createIdempotency({ store: memoryStore() });
    busyEventLoop();
    vi.useFakeTimers();

    // Act
    const first = await idempotency.run({ key: 'k', payload: { a: 1 } }, async () => 42);
    const again = await idempotency.run({ key: 'k', payload: { a: 1 } }, async () => 43);

    // Assert
    expect(first).toMatchObject({ status: 'executed', value: 42 });
    expect(again).toMatchObject({ status: 'replayed', value: 42 });
  }, 2000);

  it("still sends the calls of a window asked for with batch.window: 'turn'", async () => {
    vi.useFakeTimers();
    const idempotency = createIdempotency({ store: memoryStore(), batch: { window: 'turn' } });

    const outcome = await idempotency.run({ key: 'k', payload: { a: 1 } }, async () => 'done');

    expect(outcome).toMatchObject({ status: 'executed', value: 'done' });
  }, 2000);
});
