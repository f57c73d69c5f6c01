/**
 * The idempotent NATS JetStream consumer: thin over the shared consumer module. Redelivery later is
 * `nak(delay)`, the broker timer is kept alive with `working()`, and a dead letter is a publish to a DLQ
 * subject followed by `term()`.
 * @module
 */

import {
  type ConsumerHandler,
  type ConsumerOptions,
  type DeadLetter,
  InFlight,
  processDelivery,
  resolveConsumerOptions,
} from '../consumer/index.js';
import { type Duration, toMs } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import type { NatsHeaders, NatsJsMsg, NatsPublisher, NatsPullConsumer } from './nats-types.js';

/** The default key header of NATS: the publisher's dedup id. */
export const MSG_ID_HEADER = 'Nats-Msg-Id';
/** The fallback key header. */
export const KEY_HEADER = 'x-idempotency-key';

/** Options of {@link idempotentConsumer} for JetStream. */
export interface NatsConsumerOptions extends ConsumerOptions<NatsJsMsg> {
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
  /** Stop pulling, then wait (up to `drainTimeout`) for in-flight messages; resolves to whether it drained. */
  close(): Promise<boolean>;
  /** Resolves when the message loop ends (after `close()`, or if the server ends the consumer). */
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

type HeadersFactory = () => NatsHeaders;
let headersFactory: Promise<HeadersFactory> | undefined;

// Loaded on the first dead letter only, so importing this adapter never loads the NATS client itself.
function loadHeaders(): Promise<HeadersFactory> {
  headersFactory ??= import('@nats-io/transport-node').then(
    (nats) => nats.headers as unknown as HeadersFactory,
  );
  return headersFactory;
}

async function publishDeadLetter(
  publisher: NatsPublisher,
  subject: string,
  message: NatsJsMsg,
  letter: DeadLetter,
): Promise<void> {
  const headers = (await loadHeaders())();
  for (const [name, values] of message.headers ?? []) {
    // Nats-Msg-Id would make the DLQ stream drop a second dead letter of the same key as a duplicate.
    if (name !== MSG_ID_HEADER) for (const value of values) headers.set(name, value);
  }
  headers.set('x-idempotency-dead-letter-reason', letter.reason);
  headers.set('x-idempotency-error', JSON.stringify(letter.error));
  headers.set('x-idempotency-deliveries', String(letter.deliveryCount));
  headers.set('x-idempotency-consumer', letter.consumer);
  headers.set('x-idempotency-failed-at', letter.failedAt);
  headers.set('x-idempotency-subject', message.subject);
  headers.set('x-idempotency-stream-sequence', String(message.info.streamSequence));
  if (letter.key !== undefined) headers.set(KEY_HEADER, letter.key);
  await publisher.publish(subject, message.data, { headers });
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
  const messages = await consumer.consume({ max_messages: resolved.concurrency });
  const done = (async () => {
    for await (const message of messages) {
      await inFlight.acquire();
      inFlight.run(() =>
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
            message.term(`${letter.reason}: ${letter.error.name}: ${letter.error.message}`);
          },
          touch: () => message.working(),
          touchIntervalMs: workingMs,
        }),
      );
    }
  })();

  let closing: Promise<boolean> | undefined;
  return {
    done,
    close: () => {
      closing ??= (async () => {
        await messages.close();
        await done.catch(() => {});
        return inFlight.drain(resolved.drainTimeoutMs);
      })();
      return closing;
    },
  };
}
