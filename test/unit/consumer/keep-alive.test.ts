/**
 * The broker keep-alive of a running handler (`touch`: JetStream `working()`, a Redis Streams idle reset):
 * at most one touch in flight. On a hung connection a touch never settles; a fixed interval that did not
 * wait for it started one more every interval for as long as the handler ran.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type Delivery,
  processDelivery,
  resolveConsumerOptions,
} from '../../../src/consumer/index.js';
import { KeepAlive } from '../../../src/consumer/keep-alive.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { ManualClock } from '../../helpers/clock.js';

interface Message {
  id: string;
}

/** A delivery whose `touch` is `touch`, every 100 ms, settling nothing else of interest. */
function delivery(touch: () => Promise<void> | void): Delivery<Message> {
  return {
    message: { id: 'k1' },
    deliveryCount: 1,
    ack: () => {},
    retry: () => {},
    deadLetter: () => {},
    touch,
    touchIntervalMs: 100,
  };
}

/** A handler that runs until `finish()` is called. */
function held() {
  let finish = () => {};
  const handler = () =>
    new Promise<void>((resolve) => {
      finish = resolve;
    });
  return { handler, finish: () => finish() };
}

function options() {
  const idempotency = createIdempotency({
    store: memoryStore(),
    clock: new ManualClock(),
    extendLease: false,
    leaseMs: 60_000,
  });
  return resolveConsumerOptions<Message>({ idempotency, name: 'touching' }, (m) => m.id);
}

describe('touching a delivery while its handler runs', () => {
  beforeEach(() => {
    vi.useFakeTimers({
      toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'],
    });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('keeps one touch in flight when touches hang (a hung connection)', async () => {
    // Arrange: every touch hangs; the handler runs for 20 intervals.
    let touches = 0;
    const hung = delivery(() => {
      touches++;
      return new Promise<void>(() => {});
    });
    const { handler, finish } = held();
    // Act
    const processed = processDelivery(options(), handler, hung);
    await vi.advanceTimersByTimeAsync(2_000);
    finish();
    await processed;
    // Assert
    expect(touches).toBe(1);
  });

  it('touches again an interval after each touch settled, and stops with the handler', async () => {
    // Arrange: touches that take 50 ms each.
    const startedAt: number[] = [];
    const slow = delivery(() => {
      startedAt.push(Date.now());
      return new Promise<void>((resolve) => setTimeout(resolve, 50));
    });
    const { handler, finish } = held();
    // Act
    const processed = processDelivery(options(), handler, slow);
    await vi.advanceTimersByTimeAsync(1_000);
    finish();
    await processed;
    const count = startedAt.length;
    await vi.advanceTimersByTimeAsync(1_000);
    // Assert: one every 150 ms (100 ms wait + 50 ms touch), none after the handler ended.
    expect(count).toBe(7); // at 100, 250, …, 1000 ms
    const gaps = startedAt.slice(1).map((at, i) => at - (startedAt[i] as number));
    expect(gaps.every((gap) => gap === 150)).toBe(true);
    expect(startedAt.length).toBe(count);
  });

  it('goes on after a touch that threw or rejected, reporting each', async () => {
    // Arrange
    const errors: unknown[] = [];
    let calls = 0;
    const keepAlive = new KeepAlive(
      () => {
        calls++;
        if (calls === 1) throw new Error('sync');
        return Promise.reject(new Error('async'));
      },
      100,
      (error) => errors.push(error),
    );
    // Act
    await vi.advanceTimersByTimeAsync(250);
    keepAlive.stop();
    await vi.advanceTimersByTimeAsync(1_000);
    // Assert
    expect(calls).toBe(2);
    expect(errors.map((error) => (error as Error).message)).toEqual(['sync', 'async']);
  });

  it('reports a touch that has not settled within an interval, and goes on once it settles', async () => {
    // Arrange: the first touch hangs until the test lets it settle.
    const errors: unknown[] = [];
    let calls = 0;
    let settle = () => {};
    const keepAlive = new KeepAlive(
      () => {
        calls++;
        if (calls > 1) return;
        return new Promise<void>((resolve) => {
          settle = resolve;
        });
      },
      100,
      (error) => errors.push(error),
    );
    // Act: the touch starts at 100 ms, is overdue at 200 ms, and hangs on until 1,000 ms.
    await vi.advanceTimersByTimeAsync(1_000);
    const whileHung = { calls, errors: errors.length };
    settle();
    await vi.advanceTimersByTimeAsync(150);
    keepAlive.stop();
    // Assert: reported once, still one touch in flight; the next touch an interval after it settled.
    expect(whileHung).toEqual({ calls: 1, errors: 1 });
    expect((errors[0] as Error).message).toMatch(/has not settled within 100 ms/);
    expect(calls).toBe(2);
  });

  it('caps its interval at a timer’s limit instead of touching in a loop', async () => {
    // Arrange
    let calls = 0;
    const keepAlive = new KeepAlive(
      () => void calls++,
      2 ** 31 + 1_000,
      () => {},
    );
    // Act
    await vi.advanceTimersByTimeAsync(1_000);
    keepAlive.stop();
    // Assert: Node fires a longer timer at once (after 1 ms), and would have touched on every tick.
    expect(calls).toBe(0);
  });
});
