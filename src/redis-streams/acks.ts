/**
 * Acks sent together: every ack asked for in one burst (the microtasks of one store reply or one read) is
 * sent at the end of that burst as a single `XACK stream group id1 id2 …`.
 *
 * Why: one `XACK` per entry cost the client a command each (on node-redis 6, ~12 µs of CPU, most of it the
 * per-command timeout it arms by default) and Redis a command to parse and answer each; the engine settles
 * a store batch's messages in one burst, so their acks can share one command. Nothing is acked earlier than
 * before: an id is only handed to {@link AckBatcher.ack} once its completion is durable (or its dead letter
 * is written), and the flush happens in the same turn of the event loop.
 * @module
 */

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

  constructor(private readonly send: SendAcks) {}

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
    sent.then(() => resolve(), reject);
  }
}
