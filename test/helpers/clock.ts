/** A manual clock for unit tests: time moves only when the test says so. */
import type { Clock } from '../../src/index.js';

/** A {@link Clock} the test advances by hand. */
export class ManualClock implements Clock {
  constructor(private current = 1_700_000_000_000) {}

  now(): number {
    return this.current;
  }

  /** Move time forward by `ms`. */
  advance(ms: number): void {
    this.current += ms;
  }
}
