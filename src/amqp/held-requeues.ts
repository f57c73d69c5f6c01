/**
 * Messages redelivered later without a retry copy, held unacked meanwhile: the way a RabbitMQ delivery is
 * retried when no retry copy of it can be made (its own headers leave no room in amqplib's 64 KB header
 * table for the copy's, see header-room.ts). Only for retries where nothing final happened (the key in
 * progress elsewhere, the store unavailable, a lease lost): the message is processed again unchanged, and
 * runs or is acked as a duplicate. A handler error is dead-lettered instead (`Delivery.canRetry`): a
 * requeue carries no delivery count on a classic queue, so a failing handler would run without end.
 *
 * Processed again in this process, not handed back to the queue (`nack` with requeue), for as long as the
 * message was delivered less than {@link HELD_LOCALLY_MS} before: on a quorum queue (RabbitMQ before 4.3)
 * every requeue adds one to the message's `x-delivery-count`, and past the queue's `delivery-limit` (20 by
 * default since RabbitMQ 4.0) RabbitMQ drops the message, or dead-letters it with the queue's own
 * dead-letter exchange, without the error. Measured on RabbitMQ 3.10 with `x-delivery-limit: 2`: a message
 * held through a 3 s store outage was requeued three times and dropped, never run, and nothing said so.
 * Past that time it is handed back to the queue after its delay, as before: RabbitMQ's `consumer_timeout`
 * (30 minutes by default) closes the channel of a delivery left unacked longer.
 *
 * Before held messages existed, such a retry copy failed to encode and the message stayed unacked on its
 * prefetch slot until the channel closed (with `prefetch: 1`, the consumer received nothing more), then
 * came back and did the same.
 * @module
 */
import type { AckBatcher } from './acks.js';
import type { AmqpConfirmChannel, AmqpMessage } from './amqp-types.js';

/**
 * How long after its delivery a held message may still be processed again in this process (its delay
 * ending by then), before it is handed back to its queue instead: a third of RabbitMQ's default
 * `consumer_timeout` (30 minutes), which counts from the delivery, however often the message was processed
 * again, and closes the channel of one left unacked longer. So a run after the last hold must end within
 * `consumer_timeout` less this budget (20 minutes by default). Counted from the delivery, not from the first hold
 * as at first: a first hold at minute 9 let the message run again at minute 19, and a handler run of more
 * than 11 minutes then passed `consumer_timeout`, and the broker closed the whole channel. One requeue
 * per 10 minutes at most: a `delivery-limit` of 20 lasts more than three hours of holding.
 */
export const HELD_LOCALLY_MS = 10 * 60_000;

/**
 * Processes a held message again, unchanged, in this process: `runs` is how many times it was before
 * (1 for the first time again), added to its delivery count.
 */
export type Rerun = (message: AmqpMessage, runs: number) => void;

/** When a held message was delivered, and how many times it was processed again. */
interface Holding {
  deliveredAt: number;
  runs: number;
}

/**
 * One consumer's held messages, each processed again when its delay ends (`rerun`), or handed back to its
 * queue (`nack` with requeue) once {@link HELD_LOCALLY_MS} after its delivery, at `close()`, or without
 * `rerun`.
 */
export class HeldRequeues {
  private readonly held = new Map<NodeJS.Timeout, AmqpMessage>();
  // Keyed by amqplib's message object, the same for every run of one delivery.
  private readonly holdings = new WeakMap<AmqpMessage, Holding>();
  /** Set by {@link requeueAll}: a delivery still settling while the consumer closes is not held. */
  private closing = false;

  constructor(
    private readonly channel: AmqpConfirmChannel,
    private readonly acks: AckBatcher,
    private readonly rerun?: Rerun,
  ) {}

  /**
   * Process `message` again (or hand it back to its queue) in `delayMs`. Held unacked until then, on its
   * prefetch slot, as the delay of a retry copy would hold it in the retry queue; the handler slot is free
   * meanwhile. Its tag stays unsettled for the ack batcher (acks.ts) until it is acked or the `nack` is
   * written: no multiple ack may cover it meanwhile, and once the broker has it back any may.
   * @param deliveredAt - `performance.now()` when amqplib delivered `message` (its first run); read at its
   *   first hold only, a message processed again keeping the time of its delivery.
   */
  requeueAfter(message: AmqpMessage, delayMs: number, deliveredAt: number): void {
    if (this.closing) {
      this.requeue(message);
      return;
    }
    const now = performance.now();
    const holding = this.holdings.get(message) ?? { deliveredAt, runs: 0 };
    this.holdings.set(message, holding);
    const rerun = this.rerun;
    const again = rerun !== undefined && now + delayMs - holding.deliveredAt <= HELD_LOCALLY_MS;
    const timer = setTimeout(() => {
      this.held.delete(timer);
      if (!again) {
        this.requeue(message);
        return;
      }
      holding.runs += 1;
      rerun(message, holding.runs);
    }, delayMs);
    // The connection keeps the process alive; a held message alone must not.
    timer.unref();
    this.held.set(timer, message);
  }

  /**
   * Hand every held message back now, and any later one at once: the consumer is closing, and another
   * consumer may take them.
   */
  requeueAll(): void {
    this.closing = true;
    for (const [timer, message] of this.held) {
      clearTimeout(timer);
      this.requeue(message);
    }
    this.held.clear();
  }

  /**
   * Forget every held message, processed again never: the channel closed, and the broker requeued them
   * with it (another consumer may be running them already).
   */
  dropAll(): void {
    this.closing = true;
    for (const timer of this.held.keys()) clearTimeout(timer);
    this.held.clear();
  }

  private requeue(message: AmqpMessage): void {
    this.holdings.delete(message);
    try {
      this.channel.nack(message, false, true);
    } catch {
      // The channel is closed: the broker requeued the message with it.
      return;
    }
    this.acks.requeued(message);
  }
}
