/**
 * The in-process bus: a tiny topic → handlers broker for the embedded default, where the API, the relay and
 * the worker share one process. It is a {@link Publisher} itself.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import type { OutboxMessage } from './message.js';
import type { Publisher } from './publisher.js';

/**
 * A subscriber; the message counts as delivered when the returned promise resolves. `options.signal` is
 * aborted when the publisher stopped waiting for this delivery (the relay's `publishTimeoutMs`): it counts as
 * failed, and the message comes again after the backoff, possibly while this run still goes. A handler that
 * can stop (its `fetch`, its query) should then; either way it must be idempotent.
 */
export type BusHandler = (message: OutboxMessage, options: { signal: AbortSignal }) => unknown;

/** Options of {@link createInProcessBus}. */
export interface InProcessBusOptions {
  /**
   * Reject a publish to a topic nobody subscribes to, so the relay keeps the row and retries it (a worker
   * that starts after the relay then still gets it). With `false` such messages are dropped, as a broker
   * drops messages no queue is bound for. @default true
   */
  requireSubscriber?: boolean;
}

/** A {@link Publisher} that delivers to in-process subscribers. */
export interface InProcessBus extends Publisher {
  /**
   * Deliver `message` to every handler of its topic and resolve once all of them resolved. If any rejects,
   * the publish rejects and the relay retries the row with backoff; every handler then receives the message
   * again, so handlers must be idempotent (wrap them in an idempotent consumer).
   *
   * A handler cannot be stopped from outside: one still running when the relay gives up on the publish
   * (after `publishTimeoutMs`) goes on, and after the backoff the message is delivered again, so two runs of
   * one message can overlap. `options.signal`, which the relay aborts then, is handed to every handler so
   * that it can stop itself; an idempotent consumer around the handler keeps the second run from running
   * while the first holds the message's key (it fails the publish, and the relay retries later).
   */
  publish(message: OutboxMessage, options?: { signal?: AbortSignal }): Promise<void>;
  /** Add a handler for `topic`; returns the function that removes it. */
  subscribe(topic: string, handler: BusHandler): () => void;
  /** Number of handlers for `topic`. */
  listenerCount(topic: string): number;
}

/**
 * Create an in-process bus. A publish resolves only after the handlers finished, so a row is marked sent only
 * once its message was handled: a crash before that leaves the row unsent, and it is delivered again after
 * the restart (the same guarantee a broker with acknowledgements gives).
 * @example
 * const bus = createInProcessBus();
 * bus.subscribe('payment.initiated', async (message) => charge(decodePayload(message)));
 * const relay = createRelay({ source: sqliteOutboxSource({ database: db }), publisher: bus });
 * relay.start();
 */
export function createInProcessBus(options: InProcessBusOptions = {}): InProcessBus {
  const requireSubscriber = options.requireSubscriber ?? true;
  const handlers = new Map<string, Set<BusHandler>>();
  return {
    async publish(message, publishOptions) {
      const set = handlers.get(message.topic);
      if (set === undefined || set.size === 0) {
        if (requireSubscriber) throw new Error(`no subscriber for topic ${message.topic}`);
        return;
      }
      // A caller without a signal never gives up: the handlers get one that is never aborted.
      const signal = publishOptions?.signal ?? new AbortController().signal;
      // Each handler gets its own copy, so one cannot change what another sees.
      const results = await Promise.allSettled(
        [...set].map(async (handler) =>
          handler({ ...message, headers: { ...message.headers } }, { signal }),
        ),
      );
      const failed = results.find((result) => result.status === 'rejected');
      if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
    },
    subscribe(topic, handler) {
      if (typeof handler !== 'function') {
        throw new InvalidOptionsError('bus.subscribe: handler must be a function');
      }
      let set = handlers.get(topic);
      if (set === undefined) {
        set = new Set();
        handlers.set(topic, set);
      }
      // Wrapped, so subscribing the same function twice gives two independent subscriptions.
      const entry: BusHandler = (message, handlerOptions) => handler(message, handlerOptions);
      set.add(entry);
      return () => {
        set.delete(entry);
      };
    },
    listenerCount(topic) {
      return handlers.get(topic)?.size ?? 0;
    },
  };
}
