/**
 * One `'return'` and one `'close'` listener per channel, shared by every idempotent consumer on it.
 *
 * Why: each consumer used to add its own pair. A service that consumes eleven queues over one channel (or
 * re-creates its consumers on the same channel while copies await their confirms) got Node's
 * `MaxListenersExceededWarning`, "possible EventEmitter memory leak", at startup: a false alarm an on-call
 * engineer cannot tell from a real leak. The channel now carries one listener per event while any consumer
 * listens, whatever their number, and none once the last one is done.
 * @module
 */
import type { AmqpConfirmChannel, AmqpReturnedMessage } from './amqp-types.js';

type ReturnListener = (message: AmqpReturnedMessage) => void;
type CloseListener = () => void;

/** The consumers' listeners of one channel, behind one channel listener per event. */
export class ChannelListeners {
  private readonly returns = new Set<ReturnListener>();
  private readonly closes = new Set<CloseListener>();

  // A copy of the set is walked: a close listener takes itself off while it runs.
  private readonly onReturn: ReturnListener = (message) => {
    for (const listener of [...this.returns]) listener(message);
  };
  private readonly onClose: CloseListener = () => {
    for (const listener of [...this.closes]) listener();
  };

  constructor(private readonly channel: AmqpConfirmChannel) {}

  /** Call `listener` on each `basic.return` of the channel, until {@link removeReturn}. */
  addReturn(listener: ReturnListener): void {
    this.returns.add(listener);
    if (this.returns.size === 1) this.channel.on('return', this.onReturn);
  }

  /** Stop calling `listener`; the channel's own listener goes with the last one. */
  removeReturn(listener: ReturnListener): void {
    if (this.returns.delete(listener) && this.returns.size === 0) {
      this.channel.removeListener('return', this.onReturn);
    }
  }

  /** Call `listener` when the channel closes, until {@link removeClose}. */
  addClose(listener: CloseListener): void {
    this.closes.add(listener);
    if (this.closes.size === 1) this.channel.on('close', this.onClose);
  }

  /** Stop calling `listener`; the channel's own listener goes with the last one. */
  removeClose(listener: CloseListener): void {
    if (this.closes.delete(listener) && this.closes.size === 0) {
      this.channel.removeListener('close', this.onClose);
    }
  }
}

// Keyed by the channel, so a channel the application drops takes its record with it.
const byChannel = new WeakMap<AmqpConfirmChannel, ChannelListeners>();

/** The listeners shared by every consumer on `channel`. */
export function channelListeners(channel: AmqpConfirmChannel): ChannelListeners {
  let listeners = byChannel.get(channel);
  if (listeners === undefined) {
    listeners = new ChannelListeners(channel);
    byChannel.set(channel, listeners);
  }
  return listeners;
}
