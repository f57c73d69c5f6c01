/**
 * The idempotent NATS JetStream consumer: thin over the shared consumer module. Redelivery later is
 * `nak(delay)`, the broker timer is kept alive with `working()`, and a dead letter is a publish to a DLQ
 * subject followed by `term()`.
 * @module
 */

import {
  type ConsumerHandler,
  type ConsumerHooks,
  type ConsumerOptions,
  InFlight,
  processDelivery,
  resolveConsumerOptions,
  settlesWithin,
} from '../consumer/index.js';
import { type Duration, toMs } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import { callHook } from '../core/hooks.js';
import { KEY_HEADER, MSG_ID_HEADER, publishDeadLetter, termReason } from './dead-letter.js';
import type { NatsJsMsg, NatsPublisher, NatsPullConsumer } from './nats-types.js';

export { KEY_HEADER, MSG_ID_HEADER };

/** A failure of the consumer as a whole rather than of one message. */
export interface NatsConsumerErrorEvent {
  /** The consumer's name. */
  consumer: string;
  /**
   * What failed: `consume` (the message loop ended on an error, or without `close()` because the
   * connection closed).
   */
  operation: 'consume';
  /** The error (`consumer deleted`, `consumer not found`, `stream not found`, the connection closed, …). */
  error: unknown;
}

/** The shared consumer hooks, plus the one for failures of the consumer as a whole. */
export interface NatsConsumerHooks extends ConsumerHooks<NatsJsMsg> {
  /**
   * The message loop ended on an error: the JetStream consumer or its stream was deleted (or not found
   * after missed heartbeats), or the connection closed without `close()`. `done` then resolves; in-flight
   * messages still settle where the connection allows. Recreate the consumer (and the connection) and call
   * `idempotentConsumer` again to go on.
   */
  onConsumerError?(event: NatsConsumerErrorEvent): void;
}

/** Options of {@link idempotentConsumer} for JetStream. */
export interface NatsConsumerOptions extends ConsumerOptions<NatsJsMsg> {
  /** Observation callbacks. */
  hooks?: NatsConsumerHooks;
  /** Where dead letters are published (copy of the message + error headers). Required with `publisher`. */
  deadLetterSubject?: string;
  /** A JetStream client to publish dead letters with (the PubAck is awaited before `term()`). */
  publisher?: NatsPublisher;
  /**
   * How often `working()` resets the consumer's AckWait while a handler runs.
   * @default a third of the consumer's `ack_wait`
   */
  workingInterval?: Duration;
}

/** A running consumer. */
export interface NatsConsumer {
  /**
   * Stop pulling and start no further message (those already pulled are `nak()`ed, for redelivery), then
   * wait for in-flight messages to settle, up to `drainTimeout` in all; resolves to whether they did.
   */
  close(): Promise<boolean>;
  /**
   * Resolves when the message loop ends: after `close()`, or when the server ends the consumer (the
   * JetStream consumer or its stream deleted) or the connection closes, both reported to
   * `hooks.onConsumerError`. Never rejects.
   */
  readonly done: Promise<void>;
}

/** The default key: the `Nats-Msg-Id` header, else `x-idempotency-key`. */
export function defaultNatsKey(message: NatsJsMsg): string | undefined {
  for (const name of [MSG_ID_HEADER, KEY_HEADER]) {
    const value = message.headers?.has(name) ? message.headers.get(name) : '';
    if (value !== '') return value;
  }
  return undefined;
}

/**
 * Consume a JetStream pull consumer so that each message's effect happens once per key.
 *
 * - executed or duplicate → `ack()` (after the completion is durable in the store);
 * - in progress elsewhere, store unavailable, or a handler error with deliveries left → `nak(delay)`;
 * - a handler error on the last allowed delivery (`info.deliveryCount`) → publish to `deadLetterSubject`
 *   with the error in headers, then `term()`.
 *
 * Configure the JetStream consumer with `ack_policy: explicit`, and `max_deliver` unlimited (-1) or above
 * `maxDeliveries`: otherwise the server stops redelivering before this consumer can dead-letter.
 * @example
 * const js = jetstream(nc);
 * const consumer = await js.consumers.get('ORDERS', 'shipping');
 * const running = await idempotentConsumer(consumer, async (msg) => ship(msg.json()), {
 *   name: 'shipping', idempotency: { store }, publisher: js, deadLetterSubject: 'dlq.orders',
 * });
 */
export async function idempotentConsumer(
  consumer: NatsPullConsumer,
  handler: ConsumerHandler<NatsJsMsg>,
  options: NatsConsumerOptions,
): Promise<NatsConsumer> {
  const resolved = resolveConsumerOptions(options, defaultNatsKey);
  const { publisher, deadLetterSubject } = options;
  if ((publisher === undefined) !== (deadLetterSubject === undefined)) {
    throw new InvalidOptionsError('deadLetterSubject and publisher: give both, or neither');
  }
  let workingMs: number;
  if (options.workingInterval !== undefined) {
    workingMs = toMs(options.workingInterval, 'workingInterval');
  } else {
    const ackWaitNanos = (await consumer.info(true)).config.ack_wait ?? 30e9;
    workingMs = Math.max(Math.floor(ackWaitNanos / 1e6 / 3), 100);
  }

  const inFlight = new InFlight(resolved.concurrency);
  // Without abort_on_missing_resource the iterator retries forever against a deleted consumer or stream,
  // and `done` never resolves: abort, report it, and let the application recreate the consumer.
  const messages = await consumer.consume({
    max_messages: resolved.concurrency,
    abort_on_missing_resource: true,
  });
  let closed = false;

  // A free slot, or false once close() was called: a message waiting for a slot must not start after it.
  // Not a race against a "closed" promise: every race would leave a reaction on that promise until close,
  // a few hundred bytes per message for as long as the consumer runs. close() wakes the waiters instead.
  async function slot(): Promise<boolean> {
    while (!closed) {
      if (inFlight.tryAcquire()) return true;
      await inFlight.waitForFree();
    }
    return false;
  }

  const deliver = (message: NatsJsMsg) =>
    processDelivery(resolved, handler, {
      message,
      deliveryCount: message.info.deliveryCount,
      ack: () => message.ack(),
      retry: (delayMs) => message.nak(Math.ceil(delayMs)),
      deadLetter: async (letter) => {
        // Without a DLQ subject the error is recorded in the term reason (kept by servers ≥ 2.11).
        if (publisher !== undefined && deadLetterSubject !== undefined) {
          await publishDeadLetter(publisher, deadLetterSubject, message, letter);
        }
        message.term(termReason(letter));
      },
      touch: () => message.working(),
      touchIntervalMs: workingMs,
    });

  const loop = async () => {
    for await (const message of messages) {
      if (await slot()) {
        // close() may have come in the turn between taking the slot and here.
        if (!closed) {
          inFlight.run(() => deliver(message));
          continue;
        }
        inFlight.release();
      }
      // Pulled after close(): never started; nak() hands it back now rather than after AckWait.
      try {
        message.nak();
      } catch {
        // The connection is gone: the server redelivers after AckWait anyway.
      }
    }
    // The iterator ends by itself when the connection closes (nc.close(), or reconnection attempts used up
    // during an outage: about 20 s with the client's defaults). Without a report the service would go on
    // running, receiving nothing, with nothing said.
    if (!closed) {
      throw new Error(
        `the message loop of consumer '${resolved.name}' ended without close(): the NATS connection closed`,
      );
    }
  };
  const done = loop().catch((error: unknown) => {
    if (closed) return;
    // A hook that throws or rejects is ignored.
    callHook((event: NatsConsumerErrorEvent) => options.hooks?.onConsumerError?.(event), {
      consumer: resolved.name,
      operation: 'consume',
      error,
    });
  });

  let closing: Promise<boolean> | undefined;
  return {
    done,
    close: () => {
      closing ??= (async () => {
        closed = true;
        inFlight.wakeAll();
        const deadline = performance.now() + resolved.drainTimeoutMs;
        // The iterator ends once the loop has passed the messages already pulled (each nak()ed at once),
        // but a loop stuck elsewhere must not hold close() past the drain timeout either.
        const stopped = messages.close().then(
          () => done,
          () => done,
        );
        const loopEnded = await settlesWithin(stopped, resolved.drainTimeoutMs);
        const drained = await inFlight.drain(Math.max(deadline - performance.now(), 0));
        return loopEnded && drained;
      })();
      return closing;
    },
  };
}
