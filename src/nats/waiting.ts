/**
 * Messages that arrived from a pull while every handler slot was busy, in arrival order. Each one is kept
 * alive with `working()` while it waits, on the same interval as the handlers' touches: without it,
 * JetStream redelivered a message waiting here after `ack_wait` while this process still held it.
 *
 * A message that has waited `maxWaitMs` with no slot freeing up meanwhile leaves the queue, to be handed
 * back (`nak()`): behind handlers that hang, kept alive for ever, it would never reach a consumer with a
 * free slot (before the queue, JetStream moved it on after `ack_wait`; with pulls for free slots only, it
 * was never taken). Slots that do free up, however slowly, keep every message here.
 * @module
 */
import { KeepAlive } from '../consumer/keep-alive.js';
import type { NatsJsMsg } from './nats-types.js';

/** A message that left the queue, and when it was last touched there (`performance.now()`). */
export interface WaitedFor {
  message: NatsJsMsg;
  /** Its delivery's keep-alive goes on from here: an interval after it (KeepAlive `touchedAt`). */
  touchedAt: number;
}

/** One waiting message and what keeps it alive. */
interface Waiting {
  message: NatsJsMsg;
  keepAlive: KeepAlive;
  /** When it arrived (`performance.now()`). */
  since: number;
}

/** A first-in, first-out queue of messages waiting for a slot, each kept alive until it leaves. */
export class WaitingQueue {
  // Shifted from the front: it holds at most the messages pulled ahead of the slots, a handful.
  private readonly items: Waiting[] = [];
  // When a slot last freed up (`performance.now()`): the handlers are making progress.
  private progressAt = 0;

  /**
   * @param touch - Keeps a message alive (`working()`); may throw.
   * @param intervalMs - Wait between one `working()` settling and the next (the handlers' touch interval).
   * @param onTouchError - Told of a `working()` that threw (the message stays queued; the server may
   *   redeliver it after `ack_wait`, and the store settles the copy as a duplicate or a retry).
   * @param maxWaitMs - Checked at each touch: a message that has waited this long, with no slot freed
   *   since it arrived, leaves the queue.
   * @param onExpired - Given each message that waited `maxWaitMs`, already out of the queue.
   * @param mayExpire - Whether `message` may leave after `maxWaitMs` at all: not on the last delivery the
   *   server's `max_deliver` allows, where a hand-back has the server drop it. Such a message waits here,
   *   kept alive, until a slot frees up. Absent: every message may.
   */
  constructor(
    private readonly touch: (message: NatsJsMsg) => void,
    private readonly intervalMs: number,
    private readonly onTouchError: (message: NatsJsMsg, error: unknown) => void,
    private readonly maxWaitMs: number,
    private readonly onExpired: (message: NatsJsMsg) => void,
    private readonly mayExpire: (message: NatsJsMsg) => boolean = () => true,
  ) {}

  /** Messages waiting now. */
  get size(): number {
    return this.items.length;
  }

  /** Queue `message` last and start keeping it alive. */
  push(message: NatsJsMsg): void {
    const item = { message, since: performance.now() } as Waiting;
    item.keepAlive = new KeepAlive(
      () => {
        const waited = performance.now() - Math.max(item.since, this.progressAt);
        if (waited < this.maxWaitMs || !this.mayExpire(message)) return this.touch(message);
        this.expire(item);
      },
      this.intervalMs,
      (error) => this.onTouchError(message, error),
    );
    this.items.push(item);
  }

  /** A handler slot freed up: the waits counted against `maxWaitMs` start again from now. */
  progressed(): void {
    this.progressAt = performance.now();
  }

  /**
   * The oldest waiting message, no longer kept alive here, with its last touch: its delivery's touches
   * take over from it, not from their own start (a gap of up to two intervals more, past `ack_wait`).
   */
  shift(): WaitedFor | undefined {
    const item = this.items.shift();
    if (item === undefined) return undefined;
    item.keepAlive.stop();
    return { message: item.message, touchedAt: item.keepAlive.touchedAt };
  }

  private expire(item: Waiting): void {
    item.keepAlive.stop();
    const index = this.items.indexOf(item);
    if (index === -1) return;
    this.items.splice(index, 1);
    this.onExpired(item.message);
  }

  /** Empty the queue, in arrival order, handing each message to `each` (to `nak()` it, on close). */
  drain(each: (message: NatsJsMsg) => void): void {
    for (let next = this.shift(); next !== undefined; next = this.shift()) each(next.message);
  }
}
