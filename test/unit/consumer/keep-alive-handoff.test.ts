/**
 * The hand-off from an adapter's keep-alive of the claim phase (consumer/claim-phase.ts) to the runner's
 * own, as the handler starts: the runner's first touch came a full interval after the handler's start,
 * whenever the claim phase had last touched, so the gap between two touches reached almost two intervals
 * (past a broker timer under twice the interval: JetStream redelivered the message). Now it comes an
 * interval after the claim phase's last touch (`Delivery.touchedAt`).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { stoppingAtHandler, touchWhileClaiming } from '../../../src/consumer/claim-phase.js';
import {
  type Delivery,
  processDelivery,
  resolveConsumerOptions,
} from '../../../src/consumer/index.js';
import { KeepAlive } from '../../../src/consumer/keep-alive.js';
import { createIdempotency, memoryStore, type Store } from '../../../src/index.js';
import { ManualClock } from '../../helpers/clock.js';

interface Message {
  id: string;
}

/** A memory store whose claims answer `lateMs` later. */
function claimsLate(lateMs: number): Store {
  const inner = memoryStore();
  const store = Object.create(inner) as Store;
  Object.defineProperty(store, 'capabilities', { value: { ...inner.capabilities, batch: false } });
  Object.defineProperty(store, 'claimMany', { value: undefined });
  store.claim = async (...args: Parameters<Store['claim']>) => {
    const answer = await inner.claim(...args);
    await new Promise((resolve) => setTimeout(resolve, lateMs));
    return answer;
  };
  return store;
}

describe('keep-alives handing a delivery on', () => {
  beforeEach(() => {
    vi.useFakeTimers({
      toFake: [
        'setTimeout',
        'clearTimeout',
        'setImmediate',
        'clearImmediate',
        'Date',
        'performance',
      ],
    });
    vi.setSystemTime(0);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('starts a keep-alive an interval after the last touch of the one before it', async () => {
    // Arrange: the one before touched 70 ms ago.
    const touchedAt: number[] = [];
    const keepAlive = new KeepAlive(
      () => void touchedAt.push(Date.now()),
      100,
      () => {},
      undefined,
      performance.now() - 70,
    );
    // Act
    await vi.advanceTimersByTimeAsync(250);
    keepAlive.stop();
    // Assert: at 30 ms (100 after the last touch), then every 100 ms; `touchedAt` follows.
    expect(touchedAt).toEqual([30, 130, 230]);
    expect(keepAlive.touchedAt).toBe(230);
  });

  it('touches at once when the last touch is an interval or more ago', async () => {
    const touches: number[] = [];
    const keepAlive = new KeepAlive(
      () => void touches.push(Date.now()),
      100,
      () => {},
      undefined,
      performance.now() - 500,
    );
    await vi.advanceTimersByTimeAsync(0);
    keepAlive.stop();
    expect(touches).toEqual([0]);
  });

  it("keeps the claim phase's interval into the handler", async () => {
    // Arrange: touches every 100 ms; the claim answers after 150 ms (one claim-phase touch, at 100 ms);
    // the handler runs 400 ms.
    const touches: number[] = [];
    const idempotency = createIdempotency({
      store: claimsLate(150),
      clock: new ManualClock(),
      extendLease: false,
      leaseMs: 60_000,
      // No batching: its window follows the event loop's measured (real) load, which can move the
      // claim's answer off the fake clock's grid on a loaded machine.
      batch: false,
    });
    const options = resolveConsumerOptions<Message>({ idempotency, name: 'handoff' }, (m) => m.id);
    const touch = () => void touches.push(Date.now());
    const message = { id: 'k1' };
    const claiming = touchWhileClaiming(options, message, 1, touch, 100);
    const delivery: Delivery<Message> = {
      message,
      deliveryCount: 1,
      ack: () => claiming.stop(),
      retry: () => {},
      deadLetter: () => {},
      touch,
      touchIntervalMs: 100,
      touchedAt: () => claiming.touchedAt,
    };
    const handler = () => new Promise<void>((resolve) => setTimeout(resolve, 400));
    // Act
    const processed = processDelivery(options, stoppingAtHandler(claiming, handler), delivery);
    await vi.advanceTimersByTimeAsync(1_000);
    const decision = await processed;
    // Assert: 100 ms apart throughout (before, the handler's first touch came 100 ms after its start at
    // 150 ms: at 250, 150 ms after the one before).
    expect(decision.action).toBe('ack');
    expect(touches).toEqual([100, 200, 300, 400, 500]);
  });
});
