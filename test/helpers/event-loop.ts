/**
 * Putting this thread's event loop in a known state for the engine's load gauge
 * (`src/store/event-loop-load.ts`): busy for a whole measurement, or idle long enough that its next
 * measurement sees only idle time.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'vitest';
import { eventLoopBusy, SAMPLE_MS } from '../../src/store/event-loop-load.js';

/** Run code for `ms` without yielding: the event loop is busy all that time. */
function spin(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy on purpose
  }
}

/** Leave the event loop a whole measurement of busy time: the gauge then reports busy for the next one. */
export function busyEventLoop(): void {
  spin(SAMPLE_MS + 10);
  eventLoopBusy(); // closes whatever measurement was open, busy or not
  spin(SAMPLE_MS + 10);
  expect(eventLoopBusy()).toBe(true);
}

/** Leave the event loop idle long enough that the gauge's next measurement is all idle time. */
export async function idleEventLoop(): Promise<void> {
  eventLoopBusy(); // closes the measurement open since an earlier test
  await sleep(2 * SAMPLE_MS + 20);
  expect(eventLoopBusy()).toBe(false);
}
