/**
 * The read loop's own commands (`XREADGROUP`, `XAUTOCLAIM`, `XPENDING`) bounded by `brokerTimeout`.
 *
 * Why: on a connection hung without a command timeout (ioredis's default; node-redis with
 * `commandOptions.timeout: 0`) such a command never answers, and the loop, which sends one at a time, stopped
 * reading with every slot free, without a word; `close()` then waited out `drainTimeout` for it.
 *
 * Past its bound the command is reported (`onConsumerError`, operation `read`, a `BrokerTimeoutError`), and
 * the loop goes on waiting for it rather than sending another: a later command would only queue behind the
 * hung one on the same connection (and, once it recovers, each would read entries nobody starts). The wait
 * ends when the command answers (late), or fails (the client's own command timeout, or its reconnection
 * rejecting or resending it), and the loop carries on from there; or when `close()` is called, which then
 * abandons it at once, known hung, instead of waiting out `drainTimeout`.
 * @module
 */
import { TIMED_OUT, within } from '../consumer/timer-race.js';

/** What {@link awaitLoopCommand} resolves to when `close()` abandoned a command past its bound. */
export const ABANDONED: unique symbol = Symbol('abandoned');

/**
 * How the consumer sends one of its loop's commands: {@link awaitLoopCommand} with its bound (`ms`, else
 * `brokerTimeout`), its report and its `close()`.
 */
export type LoopCommand = <T>(
  sent: Promise<T>,
  what: string,
  ms?: number,
) => Promise<T | typeof ABANDONED>;

/** What {@link awaitLoopCommand} needs besides the command. */
export interface LoopCommandBound {
  /** The command's bound in ms: `brokerTimeout`, plus `block` for a blocking read. */
  ms: number;
  /** The command, as the report names it (`XAUTOCLAIM`). */
  what: string;
  /** Reports the command past its bound, once. */
  report: (error: Error) => void;
  /** Settles when `close()` is called. */
  closed: Promise<void>;
}

/** The error a loop command past its bound is reported with. */
export function loopTimeoutError(what: string, ms: number): Error {
  const error = new Error(
    `Redis has not answered the read loop's ${what} within ${ms} ms (brokerTimeout): nothing more is read until it answers or fails; a connection hung without a command timeout stays so (give the client one, or one that reconnects)`,
  );
  error.name = 'BrokerTimeoutError';
  return error;
}

/**
 * `sent`'s answer (a rejection passed on); past `bound.ms`, reported once and then still waited for, until
 * it answers or `bound.closed` settles ({@link ABANDONED}).
 */
export async function awaitLoopCommand<T>(
  sent: Promise<T>,
  bound: LoopCommandBound,
): Promise<T | typeof ABANDONED> {
  // Unref'd: a hung Redis must not keep the process alive by itself.
  const answer = await within(sent, bound.ms, true);
  if (answer !== TIMED_OUT) return answer;
  bound.report(loopTimeoutError(bound.what, bound.ms));
  return Promise.race([sent, bound.closed.then((): typeof ABANDONED => ABANDONED)]);
}
