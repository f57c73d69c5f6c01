/**
 * The `basic.return`s of the outbox's mandatory publishes, tracked per confirm channel for every
 * `amqpPublisher` that publishes on it.
 *
 * Why per channel and only while a publish awaits its confirm: a listener per publisher, kept for the
 * channel's life, piled up on a long-lived channel with every publisher created on it (a relay restarted
 * with a new publisher), and each of them recorded every return on the channel, its own publishes' or
 * not, with nothing ever taking the others': a row retried as unroutable grew every stale publisher's
 * record by one entry per message id, for as long as the channel lived. Now a return is recorded only for
 * a message id a publish on that channel is waiting for, and forgotten with that publish's confirm.
 * @module
 */

/** An `amqpPublisher` channel, as this module uses it (amqplib's `ConfirmChannel` fits). */
export interface ReturningChannel {
  /** Subscribe to `return` (mandatory messages the broker could not route). */
  on(
    event: 'return',
    listener: (message: { properties: { messageId?: unknown } }) => void,
  ): unknown;
  /** Unsubscribe; when the channel has none, its one listener stays for the channel's life. */
  removeListener?(
    event: 'return',
    listener: (message: { properties: { messageId?: unknown } }) => void,
  ): unknown;
}

/** The publishes of one channel awaiting their confirm, and which of them the broker returned. */
class ChannelReturns {
  // Message id → publishes of it awaiting their confirm, and → returns received for them.
  private readonly awaiting = new Map<string, number>();
  private readonly returned = new Map<string, number>();
  private listening = false;

  private readonly listener = (message: { properties: { messageId?: unknown } }): void => {
    const id = message?.properties?.messageId;
    // Another publisher's (or the application's) message on the same channel: none of ours.
    if (typeof id !== 'string' || !this.awaiting.has(id)) return;
    this.returned.set(id, (this.returned.get(id) ?? 0) + 1);
  };

  constructor(private readonly channel: ReturningChannel) {}

  /** Before publishing `id`: a return of it is recorded until {@link settled} is called for it. */
  watch(id: string): void {
    if (!this.listening) {
      this.channel.on('return', this.listener);
      this.listening = true;
    }
    this.awaiting.set(id, (this.awaiting.get(id) ?? 0) + 1);
  }

  /**
   * The publish of `id` was confirmed, nacked, failed or given up on: whether the broker returned it. RabbitMQ sends a
   * message's `basic.return` before its confirm, so a return for it has arrived by now.
   */
  settled(id: string): boolean {
    const waiting = this.awaiting.get(id) ?? 0;
    const returns = this.returned.get(id) ?? 0;
    if (waiting <= 1) {
      // The last publish of this id: no return of it can belong to anything still waiting.
      this.awaiting.delete(id);
      this.returned.delete(id);
    } else {
      this.awaiting.set(id, waiting - 1);
      if (returns > 1) this.returned.set(id, returns - 1);
      else this.returned.delete(id);
    }
    // Nothing awaiting: nothing to listen for, so nothing stays on the application's channel.
    if (this.awaiting.size === 0 && typeof this.channel.removeListener === 'function') {
      this.channel.removeListener('return', this.listener);
      this.listening = false;
    }
    return returns > 0;
  }
}

// Shared by every publisher on a channel; a closed channel's record goes with it.
const byChannel = new WeakMap<ReturningChannel, ChannelReturns>();

/** The return tracking of `channel`, shared by every publisher on it. */
export function channelReturns(channel: ReturningChannel): ChannelReturns {
  let returns = byChannel.get(channel);
  if (returns === undefined) {
    returns = new ChannelReturns(channel);
    byChannel.set(channel, returns);
  }
  return returns;
}
