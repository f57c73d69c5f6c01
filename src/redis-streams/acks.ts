/**
 * Acks sent together: every ack asked for in one burst (the microtasks of one store reply or one read) is
 * sent at the end of that burst as a single `XACK stream group id1 id2 …`.
 *
 * Why: one `XACK` per entry cost the client a command each (on node-redis 6, ~12 µs of CPU, most of it the
 * per-command timeout it arms by default) and Redis a command to parse and answer each; the engine settles
 * a store batch's messages in one burst, so their acks can share one command. Nothing is acked earlier than
 * before: an id is only handed to {@link AckBatcher.ack} once its completion is durable (or its dead letter
 * is written), and the flush happens in the same turn of the event loop.
 *
 * An `XACK` that Redis never answers (a connection hung without a command timeout: ioredis's default) is
 * waited for at most `timeoutMs` (the consumer's `brokerTimeout`), with one timer per command, not per
 * entry: its callers are then rejected, and their handler slots freed, rather than held for as long as
 * the connection hangs. Their entries stay pending, unless the command lands later; either way their
 * completions are durable, so a redelivery is acked as a duplicate.
 * @module
 */
import { brokerTimeoutError } from '../consumer/broker-deadline.js';

/** Rejects the callers of an `XACK` not answered within `ms` (a timer callback: no closure per burst). */
function timedOut(reject: (error: unknown) => void, count: number, ms: number): void {
  reject(
    brokerTimeoutError(
      `the XACK of ${count} entries`,
      ms,
      'unless it lands later, its entries stay pending, to be reclaimed after minIdle and acked as duplicates',
    ),
  );
}

/** Sends one `XACK` for `ids`; its promise settles with Redis's reply. */
export type SendAcks = (ids: string[]) => Promise<unknown>;

/**
 * Gathers the acks of one burst into one command. Every caller of a burst shares one promise: it resolves
 * once Redis has answered the `XACK` that carried the caller's id, and rejects, for every caller of that
 * burst, if the command failed (the entries then stay pending and come back through `XAUTOCLAIM`, as a
 * failed single `XACK` left them).
 */
export class AckBatcher {
  private ids: string[] = [];
  private flushed: Promise<void> | undefined;

  /**
   * @param send - Sends one `XACK`.
   * @param timeoutMs - How long an `XACK` is waited for before its callers are rejected.
   */
  constructor(
    private readonly send: SendAcks,
    private readonly timeoutMs: number,
  ) {}

  /** Ack `id` with the others of this burst; settles when that `XACK`'s reply comes back. */
  ack(id: string): Promise<void> {
    this.ids.push(id);
    // One promise per burst, not per caller: each caller awaits it, so a rejection is always handled.
    this.flushed ??= new Promise<void>((resolve, reject) => {
      // After the current microtasks: every ack decided in this burst joins the same command.
      process.nextTick(() => this.flush(resolve, reject));
    });
    return this.flushed;
  }

  private flush(resolve: () => void, reject: (error: unknown) => void): void {
    const ids = this.ids;
    this.ids = [];
    this.flushed = undefined;
    let sent: Promise<unknown>;
    try {
      sent = this.send(ids);
    } catch (error) {
      sent = Promise.reject(error);
    }
    // The error is made only if the timer fires: a stack captured per XACK would cost every burst.
    const timer = setTimeout(timedOut, this.timeoutMs, reject, ids.length, this.timeoutMs);
    // A command nobody answers must not keep the process alive.
    timer.unref();
    sent.then(
      () => {
        clearTimeout(timer);
        resolve();
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  }
}
