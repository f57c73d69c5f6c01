/**
 * One RabbitMQ delivery as the shared consumer runner sees it: the message, its delivery count, and the
 * channel operations that settle it (ack, a delayed copy through the retry queue, a dead letter).
 * @module
 */
import type { DeadLetter, Delivery } from '../consumer/index.js';
import type { AckBatcher } from './acks.js';
import type { AmqpConfirmChannel, AmqpMessage, AmqpPublishOptions } from './amqp-types.js';
import { copyOptions, DELIVERIES_HEADER, deadLetterHeaders, deliveryCount } from './headers.js';

/** What every delivery of one consumer settles through. */
export class AmqpSettler {
  constructor(
    readonly channel: AmqpConfirmChannel,
    readonly acks: AckBatcher,
    readonly retryQueue: string,
    readonly deadLetterQueue: string,
  ) {}

  /** Publish to `queue` and resolve once the broker confirmed the copy. */
  publishConfirmed(queue: string, content: Buffer, options: AmqpPublishOptions): Promise<void> {
    return new Promise((resolve, reject) => {
      this.channel.sendToQueue(queue, content, options, (error) =>
        error ? reject(error) : resolve(),
      );
    });
  }
}

/**
 * A class rather than an object of closures: one small object per message, with the methods shared.
 * A copy is always confirmed by the broker before the original is acked, so a crash in between can only
 * duplicate the message (deduplicated by its key), never lose it.
 */
export class AmqpDelivery implements Delivery<AmqpMessage> {
  readonly deliveryCount: number;

  constructor(
    private readonly settler: AmqpSettler,
    readonly message: AmqpMessage,
  ) {
    this.deliveryCount = deliveryCount(message);
  }

  ack(): Promise<void> {
    return this.settler.acks.ack(this.message);
  }

  async retry(delayMs: number): Promise<void> {
    const { settler, message } = this;
    await settler.publishConfirmed(settler.retryQueue, message.content, {
      ...copyOptions(message, { [DELIVERIES_HEADER]: this.deliveryCount }),
      // The TTL is a string of whole milliseconds; the retry queue dead-letters the copy back when it expires.
      expiration: String(Math.ceil(delayMs)),
    });
    await settler.acks.ack(message);
  }

  async deadLetter(letter: DeadLetter): Promise<void> {
    const { settler, message } = this;
    await settler.publishConfirmed(
      settler.deadLetterQueue,
      message.content,
      copyOptions(message, deadLetterHeaders(letter)),
    );
    await settler.acks.ack(message);
  }
}
