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

/**
 * A clock that never steps (`performance.now()`), for measuring how long something lasts in this process:
 * the wall clock jumps when NTP steps it or a VM resumes. Its values are not epoch times. Internal.
 */
export const monotonicClock: Clock = { now: () => performance.now() };
