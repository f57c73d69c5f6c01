/**
 * Copies the broker could not route. RabbitMQ *confirms* a message that no queue took (the retry or
 * dead-letter queue was deleted, or `declare: false` with a mistyped name): a confirm alone would let the
 * original be acked and the message be lost. So copies are published `mandatory`, and a `basic.return`
 * (which RabbitMQ sends before the confirm of the same message) turns the confirm into a failure.
 * @module
 */
import { randomBytes } from 'node:crypto';
import type { AmqpReturnedMessage } from './amqp-types.js';

/**
 * On every retry and dead-letter copy: an id that ties a `basic.return` to the publish it answers. The
 * return carries the copy's properties but nothing else that tells two copies to one queue apart.
 */
export const COPY_ID_HEADER = 'x-idempotency-copy-id';

// Unique across processes: a retry copy's id is also its identity in the store (see `delivery.ts`), where a
// collision with another process's copy could dead-letter a message without running it. 8 random bytes
// (before: 4, when the id only had to match a return to its publish within one channel).
const PROCESS_ID = randomBytes(8).toString('hex');
let copies = 0;

/** A new id for a copy, unique across processes. */
export function newCopyId(): string {
  return `${PROCESS_ID}-${++copies}`;
}

/** The error a returned copy's publish fails with. */
export class UnroutableCopyError extends Error {
  constructor(
    /** The queue the copy was published to. */
    readonly queue: string,
    returned: AmqpReturnedMessage,
  ) {
    const { replyCode, replyText } = returned.fields;
    super(
      `RabbitMQ returned the copy published to queue "${queue}" (${String(replyCode)} ${String(replyText)}): ` +
        'no queue took it (does the queue exist?). The original message was not acked.',
    );
    this.name = 'UnroutableCopyError';
  }
}

/** The copies of one consumer awaiting their confirm, and which of them the broker returned. */
export class ReturnedCopies {
  private readonly awaiting = new Set<string>();
  private readonly returned = new Map<string, AmqpReturnedMessage>();
  private idleWaiters: Array<() => void> = [];

  /** The channel's `'return'` listener. Returns of publishes that are not this consumer's are ignored. */
  readonly listener = (message: AmqpReturnedMessage): void => {
    const id = message.properties.headers?.[COPY_ID_HEADER];
    const text = Buffer.isBuffer(id) ? id.toString('utf8') : id;
    if (typeof text === 'string' && this.awaiting.has(text)) this.returned.set(text, message);
  };

  /** A new copy id, awaiting its confirm. */
  next(): string {
    const id = newCopyId();
    this.awaiting.add(id);
    return id;
  }

  /** Once copy `id` is confirmed (or failed): the return the broker sent for it, if any; forgets it. */
  settled(id: string): AmqpReturnedMessage | undefined {
    this.awaiting.delete(id);
    const returned = this.returned.get(id);
    if (returned !== undefined) this.returned.delete(id);
    if (this.awaiting.size === 0 && this.idleWaiters.length > 0) {
      for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
    return returned;
  }

  /**
   * Resolves once no copy awaits its confirm. A copy given up on (`brokerTimeout`) holds no handler slot
   * but still awaits it: were the `return` listener taken off before, its late return would go unseen and
   * its late confirm taken for a routed copy, its original acked and the message lost. The channel's
   * close settles every confirm still awaited (amqplib fails them), so this ends with the channel at the
   * latest.
   */
  idle(): Promise<void> {
    if (this.awaiting.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}
