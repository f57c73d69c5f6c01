/**
 * The bound on the broker calls that settle a delivery (`brokerTimeout`). A settle that never answers (a
 * Redis `XACK`, `XCLAIM` or `XADD` on a connection hung without a command timeout, a RabbitMQ copy whose
 * confirm never comes, a NATS dead letter whose PubAck waits out a long request timeout) used to hold its
 * delivery's handler slot for as long as it hung: with as many as there are slots, the consumer stopped
 * consuming, and `close()` gave up after `drainTimeout` with them still held.
 *
 * Past the bound the consumer stops waiting, reports it (`onBrokerError`), and frees the slot. It never
 * acts as if the call had succeeded, nor as if it had failed: the call goes on, and whatever it does if it
 * answers later (a copy confirmed and then its original acked, a dead letter written and then its entry
 * acked) is what the broker's redelivery meets. In particular a dead letter given up on is not carried on
 * a retry copy nor recorded again: the hung write may still land, and a second way of writing it would
 * write it twice.
 * @module
 */

import { isThenable } from '../core/thenable.js';
import { within } from './timer-race.js';

/**
 * Wait for `result` (a settle call's return value) at most `ms`: resolves to `TIMED_OUT` (timer-race.ts)
 * when it did not answer in time, passes a rejection on. A call that returned synchronously (NATS `ack()`) costs no
 * timer. The timer is unref'd: a hung settle must not keep a process alive.
 */
export function withinBrokerTimeout(result: unknown, ms: number): Promise<unknown> | undefined {
  return isThenable(result) ? within(Promise.resolve(result), ms, true) : undefined;
}

/**
 * The error a settle given up on is reported with (`onBrokerError`).
 * @param what - The call, as the message names it (`the XACK`, `the retry`).
 * @param then - What becomes of the delivery.
 */
export function brokerTimeoutError(what: string, ms: number, then: string): Error {
  const error = new Error(
    `The broker has not answered ${what} of this delivery within ${ms} ms (brokerTimeout): ${then}`,
  );
  error.name = 'BrokerTimeoutError';
  return error;
}
