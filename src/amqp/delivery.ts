/**
 * One RabbitMQ delivery as the shared consumer runner sees it: the message, its delivery count, and the
 * channel operations that settle it (ack, a delayed copy through the retry queue, a dead letter).
 * @module
 */
import type { DeadLetter, Delivery } from '../consumer/index.js';
import type { AckBatcher } from './acks.js';
import type { AmqpConfirmChannel, AmqpMessage, AmqpPublishOptions } from './amqp-types.js';
import { fitsHeaderTable } from './header-room.js';
import { deadLetterOptions, deliveryCount, deliveryId, retryOptions } from './headers.js';
import { HeldRequeues, type Rerun } from './held-requeues.js';
import { pendingDeadLetter } from './pending-letter.js';
import { COPY_ID_HEADER, ReturnedCopies, UnroutableCopyError } from './returns.js';
import { asPublished } from './routing.js';

/** What every delivery of one consumer settles through. */
export class AmqpSettler {
  /** Copies awaiting their confirm; its `listener` must be on the channel's `'return'` event. */
  readonly returns = new ReturnedCopies();
  /**
   * Messages no retry copy can be made of, processed again after their delay (`rerun`), or handed back to
   * their queue (held-requeues.ts).
   */
  readonly held: HeldRequeues;

  /** @param rerun - Processes a held message again in this process; without it, it is handed back. */
  constructor(
    readonly channel: AmqpConfirmChannel,
    readonly acks: AckBatcher,
    readonly retryQueue: string,
    readonly deadLetterQueue: string,
    rerun?: Rerun,
  ) {
    this.held = new HeldRequeues(channel, acks, rerun);
  }

  /**
   * Publish to `queue` and resolve once the broker confirmed the copy. Rejects if the broker refused it,
   * or returned it because no queue took it ({@link UnroutableCopyError}): then the original must not
   * be acked.
   */
  publishConfirmed(queue: string, content: Buffer, options: AmqpPublishOptions): Promise<void> {
    const id = this.returns.next();
    const sent = {
      ...options,
      mandatory: true,
      headers: { ...options.headers, [COPY_ID_HEADER]: id },
    };
    return new Promise<void>((resolve, reject) => {
      this.channel.sendToQueue(queue, content, sent, (error) => {
        // RabbitMQ sends a copy's basic.return before its confirm, so it is known by now.
        const returned = this.returns.settled(id);
        if (error) reject(error);
        else if (returned !== undefined) reject(new UnroutableCopyError(queue, returned));
        else resolve();
      });
    }).catch((error: unknown) => {
      // sendToQueue may throw before any confirm (a header table over 64 KB, a closed channel).
      this.returns.settled(id);
      throw error;
    });
  }
}

/**
 * A class rather than an object of closures: one small object per message, with the methods shared.
 * A copy is always confirmed by the broker, and not returned, before the original is acked, so a crash in
 * between can only duplicate the message (deduplicated by its key), never lose it.
 */
export class AmqpDelivery implements Delivery<AmqpMessage> {
  /** The message as the handler sees it: a retry copy with the routing it was published with. */
  readonly message: AmqpMessage;
  readonly deliveryCount: number;
  readonly pendingDeadLetter: DeadLetter | undefined;
  /**
   * A retry copy's own id: its dead letter is recorded under it before it is written, so that the copy,
   * requeued when the link died before the letter's confirm (or the original's ack), writes the letter
   * again instead of running the handler once more. None for the application's original message.
   */
  readonly brokerId: string | undefined;
  /**
   * Never delivered before (`redelivered` unset, nor held and processed again): no record can be under
   * its id, none is read.
   */
  readonly firstDelivery: boolean;
  /** amqplib's message, the same object for every run of this delivery (held-requeues.ts). */
  private readonly delivered: AmqpMessage;
  /**
   * `performance.now()` when this run was created: for the first, when amqplib delivered the message,
   * from which RabbitMQ's `consumer_timeout` counts (held-requeues.ts reads the first run's only).
   */
  private readonly createdAt = performance.now();

  /**
   * @param message - amqplib's message.
   * @param reruns - How many times this delivery was processed before in this process (held, see
   *   held-requeues.ts): each counts as a delivery, as the requeue it stands for would have.
   */
  constructor(
    private readonly settler: AmqpSettler,
    message: AmqpMessage,
    reruns = 0,
  ) {
    this.delivered = message;
    this.deliveryCount = deliveryCount(message) + reruns;
    this.pendingDeadLetter = pendingDeadLetter(message);
    this.brokerId = deliveryId(message);
    this.firstDelivery = message.fields.redelivered !== true && reruns === 0;
    // A retry copy came back through the default exchange: its handler, hooks and next copy see the
    // exchange and routing key of the application's publish (routing.ts).
    this.message = this.brokerId === undefined ? message : asPublished(message, settler.retryQueue);
  }

  ack(): Promise<void> {
    return this.settler.acks.ack(this.message);
  }

  /**
   * Whether a retry copy of the message can be published: its header table fits amqplib's 64 KB. The
   * message's own headers may leave no room for the copy's, and none of them can be left out (the
   * handler would run on another message): a handler error is then dead-lettered at once
   * (`headers_too_large`, consumer/settle.ts).
   */
  canRetry(): boolean {
    return fitsHeaderTable(
      retryOptions(this.message, this.deliveryCount, 0, undefined).headers ?? {},
    );
  }

  /**
   * A confirmed retry copy, then the original's ack. When no copy can be made ({@link canRetry}: only an
   * in-progress, store-unavailable or lease-lost retry comes here then, or a dead letter that could not
   * be written), the message is held and processed again unchanged after `delayMs`, in this process
   * (held-requeues.ts: a requeue would count toward a quorum queue's `delivery-limit`), instead of held
   * unacked for good; a retry copy's run again finds its dead letter recorded in the store.
   */
  async retry(delayMs: number, letter?: DeadLetter): Promise<void> {
    const { settler, message } = this;
    const options = retryOptions(message, this.deliveryCount, delayMs, letter);
    if (!fitsHeaderTable(options.headers ?? {})) {
      settler.held.requeueAfter(this.delivered, delayMs, this.createdAt);
      return;
    }
    await settler.publishConfirmed(settler.retryQueue, message.content, options);
    await settler.acks.ack(message);
  }

  async deadLetter(letter: DeadLetter): Promise<void> {
    const { settler, message } = this;
    await settler.publishConfirmed(
      settler.deadLetterQueue,
      message.content,
      deadLetterOptions(message, letter),
    );
    await settler.acks.ack(message);
  }
}
