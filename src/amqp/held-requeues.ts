/**
 * Messages handed back to their queue after a delay, held unacked meanwhile: the way a RabbitMQ delivery
 * is redelivered later when no retry copy of it can be made (its own headers leave no room in amqplib's
 * 64 KB header table for the copy's, see header-room.ts). Only for retries where nothing final happened
 * (the key in progress elsewhere, the store unavailable, a lease lost): a `nack` with requeue needs no
 * encoding, brings the message back unchanged, and the redelivery runs or is acked as a duplicate. A
 * handler error is dead-lettered instead (`Delivery.canRetry`): a requeue carries no delivery count on a
 * classic queue, so a failing handler would run without end.
 *
 * Before, such a retry copy failed to encode and the message stayed unacked on its prefetch slot until
 * the channel closed (with `prefetch: 1`, the consumer received nothing more), then came back and did the
 * same.
 * @module
 */
import type { AckBatcher } from './acks.js';
import type { AmqpConfirmChannel, AmqpMessage } from './amqp-types.js';

/** One consumer's held messages, each `nack`ed with requeue when its delay ends, or at `close()`. */
export class HeldRequeues {
  private readonly held = new Map<NodeJS.Timeout, AmqpMessage>();
  /** Set by {@link requeueAll}: a delivery still settling while the consumer closes is not held. */
  private closing = false;

  constructor(
    private readonly channel: AmqpConfirmChannel,
    private readonly acks: AckBatcher,
  ) {}

  /**
   * Hand `message` back to its queue in `delayMs`. Held unacked until then, on its prefetch slot, as the
   * delay of a retry copy would hold it in the retry queue; the handler slot is free meanwhile. Its tag
   * stays unsettled for the ack batcher (acks.ts) until the `nack` is written: no multiple ack may cover it
   * meanwhile, and once the broker has it back any may.
   */
  requeueAfter(message: AmqpMessage, delayMs: number): void {
    if (this.closing) {
      this.requeue(message);
      return;
    }
    const timer = setTimeout(() => {
      this.held.delete(timer);
      this.requeue(message);
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

  private requeue(message: AmqpMessage): void {
    try {
      this.channel.nack(message, false, true);
    } catch {
      // The channel is closed: the broker requeued the message with it.
      return;
    }
    this.acks.requeued(message);
  }
}
