/**
 * The engine's source of time, injectable so unit tests run without waiting.
 * @module
 */

/** A source of wall-clock time in epoch milliseconds. */
export interface Clock {
  /** Current time in epoch milliseconds. */
  now(): number;
}

/** The real clock (`Date.now`). */
export const systemClock: Clock = { now: () => Date.now() };
