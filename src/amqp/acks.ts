/**
 * Acks sent together: every ack asked for in one burst (the microtasks of one broker read or one store
 * reply) is written at the end of that burst, and the ones that form a prefix of this consumer's
 * unsettled deliveries go as a single `basic.ack` with `multiple` set.
 *
 * Why: one ack frame per message costs the client a socket write and RabbitMQ a frame, a channel step and
 * a queue step each; a multiple ack settles a whole prefix for the price of one. Nothing is acked earlier
 * than before: a message is only ever handed to {@link AckBatcher.ack} once its completion is durable (or
 * its retry / dead-letter copy is confirmed), and the flush happens in the same turn of the event loop.
 * @module
 */
import type { AmqpConfirmChannel, AmqpMessage } from './amqp-types.js';

/**
 * Tracks this consumer's deliveries on its channel and writes acks in bursts.
 *
 * A multiple ack settles every unacked delivery on the *channel* up to its tag, whoever consumed it, so it
 * is only used while this consumer has seen every delivery tag of the channel (1, 2, 3, … with no gap):
 * then every tag up to the lowest one still being processed is ours and already decided. Another consumer
 * or a `basic.get` on the same channel shows up as a gap in the tags; from then on each message is acked
 * on its own, as a plain consumer would.
 */
export class AckBatcher {
  // Tags delivered to this consumer and not yet handed to `ack`, in delivery order (a Set keeps insertion
  // order, so its first element is the lowest). A message that is never acked (its retry copy could not be
  // published) stays here, and acks above it are sent one by one: slower, never wrong.
  private readonly unsettled = new Set<number>();
  private lastTag = 0;
  private contiguous = true;
  private pending: AmqpMessage[] = [];
  private flushed: Promise<void> | undefined;
  private settle: { resolve(): void; reject(error: unknown): void } | undefined;

  constructor(private readonly channel: AmqpConfirmChannel) {}

  /** Record a delivery to this consumer; call it for every message, in the order they arrive. */
  delivered(message: AmqpMessage): void {
    const tag = message.fields.deliveryTag;
    if (tag !== this.lastTag + 1) {
      // A gap or a restart: some tag of this channel is not ours, so no multiple ack can be proven safe.
      this.contiguous = false;
      this.unsettled.clear();
    }
    this.lastTag = tag;
    if (this.contiguous) this.unsettled.add(tag);
  }

  /**
   * Forget `message`, handed back to its queue by a `nack` already written (held-requeues.ts): the broker
   * no longer counts it unacked, so a later multiple ack above its tag does not settle it. Left unsettled,
   * its tag was the floor for good, and every later ack of the consumer went on its own.
   */
  requeued(message: AmqpMessage): void {
    this.unsettled.delete(message.fields.deliveryTag);
  }

  /**
   * Ack `message` (already decided: its outcome is durable) with the others of this burst. Resolves once
   * the ack is written to the channel; rejects if the channel refused it (closed).
   */
  ack(message: AmqpMessage): Promise<void> {
    this.unsettled.delete(message.fields.deliveryTag);
    this.pending.push(message);
    if (this.flushed === undefined) {
      this.flushed = new Promise<void>((resolve, reject) => {
        this.settle = { resolve, reject };
      });
      // After the current microtasks: every ack decided in this burst joins the same flush.
      process.nextTick(() => this.flush());
    }
    return this.flushed;
  }

  private flush(): void {
    const batch = this.pending;
    const settle = this.settle;
    this.pending = [];
    this.flushed = undefined;
    this.settle = undefined;
    try {
      this.write(batch);
      settle?.resolve();
    } catch (error) {
      settle?.reject(error);
    }
  }

  private write(batch: AmqpMessage[]): void {
    if (!this.contiguous) {
      for (const message of batch) this.channel.ack(message);
      return;
    }
    // Every tag below the lowest unsettled one is ours and either acked before or in this batch.
    const first = this.unsettled.values().next();
    const floor = first.done ? Number.POSITIVE_INFINITY : first.value;
    let highest: AmqpMessage | undefined;
    for (const message of batch) {
      const tag = message.fields.deliveryTag;
      if (tag > floor) this.channel.ack(message);
      else if (highest === undefined || tag > highest.fields.deliveryTag) highest = message;
    }
    // `highest` itself is unacked (it is in this batch), so the broker knows the tag.
    if (highest !== undefined) this.channel.ack(highest, true);
  }
}
