/**
 * NATS JetStream publisher: a publish resolves on the stream's PubAck, and carries the stable id as
 * `Nats-Msg-Id` so JetStream drops a re-send within the stream's duplicate window. No static import of the
 * NATS libraries.
 * @module
 */
import { MAX_TIMER_MS } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import { ignoreRejection } from '../core/hooks.js';
import { knownFields, shownValue } from '../core/option-checks.js';
import type { OutboxMessage } from './message.js';
import { natsPayloadError } from './nats-max-payload.js';
import { natsNoStreamError } from './nats-no-stream.js';
import type { Publisher } from './publisher.js';

/** NATS message headers (`MsgHdrs` from `@nats-io/transport-node`'s `headers()`). */
export interface NatsHeadersLike {
  /** Set a header value. */
  set(name: string, value: string): void;
}

/** A JetStream PubAck. */
export interface NatsPubAckLike {
  /** The stream that stored the message. */
  stream: string;
  /** Its sequence number in the stream. */
  seq: number;
  /** True when the stream already had a message with this `Nats-Msg-Id` (within its duplicate window). */
  duplicate: boolean;
}

/** The slice of a JetStream client (`jetstream(nc)` from `@nats-io/jetstream`) the publisher uses. */
export interface JetStreamClientLike {
  /** Publish and wait for the stream's acknowledgement. */
  publish(
    subject: string,
    payload: Uint8Array,
    options?: { msgID?: string; headers?: unknown; timeout?: number },
  ): Promise<NatsPubAckLike>;
}

/** Options of {@link natsPublisher}. */
export interface NatsPublisherOptions {
  /**
   * A JetStream client (`jetstream(nc)`). A stream must capture the subjects published to. The connection
   * itself is refused: its publish waits for no PubAck and sends no `Nats-Msg-Id`.
   */
  js: JetStreamClientLike;
  /** Subject of a message. @default (message) => message.topic */
  subject?: (message: OutboxMessage) => string;
  /**
   * The `headers` factory of `@nats-io/transport-node` (or `@nats-io/nats-core`), used to send the message's
   * headers, key and content type. @default loaded lazily from `@nats-io/transport-node`
   */
  headers?: () => NatsHeadersLike;
  /** Wait for the PubAck at most this long. @default the client's own timeout */
  timeoutMs?: number;
  /** Called when the stream reported the publish as a duplicate (a re-send it had already stored). */
  onDuplicate?: (message: OutboxMessage, ack: NatsPubAckLike) => void;
}

/** Header carrying the message's business key. */
export const NATS_KEY_HEADER = 'Outbox-Key';

let loadedHeaders: Promise<() => NatsHeadersLike> | undefined;

// The peer is imported on first use only, so `idempotency-kit/outbox` loads without it.
function defaultHeaders(): Promise<() => NatsHeadersLike> {
  loadedHeaders ??= import('@nats-io/transport-node').then(
    (module) => (module as { headers: () => NatsHeadersLike }).headers,
    (error) => {
      loadedHeaders = undefined;
      throw new InvalidOptionsError(
        'natsPublisher: pass `headers` (from @nats-io/transport-node), or install it',
        { cause: error },
      );
    },
  );
  return loadedHeaders;
}

// Every key of NatsPublisherOptions, checked by the compiler both ways: a misspelt option is refused
// instead of leaving its default in force.
const PUBLISHER_FIELDS = Object.keys({
  js: true,
  subject: true,
  headers: true,
  timeoutMs: true,
  onDuplicate: true,
} as const satisfies Record<keyof NatsPublisherOptions, true>);

/**
 * Create a NATS JetStream publisher: `msgID` = the outbox message id (sent as `Nats-Msg-Id`), plus the
 * message's headers, `Content-Type`, `Outbox-Topic` and `Outbox-Key`. A PubAck marked `duplicate` counts as
 * confirmed: the stream already holds the message.
 * @example
 * import { headers } from '@nats-io/transport-node';
 * import { jetstream } from '@nats-io/jetstream';
 * const publisher = natsPublisher({ js: jetstream(nc), headers });
 */
export function natsPublisher(options: NatsPublisherOptions): Publisher {
  const js = options?.js;
  if (typeof js?.publish !== 'function') {
    throw new InvalidOptionsError('natsPublisher: `js` must be a JetStream client');
  }
  // The connection has a publish() too, which the stream also stores, but it returns no PubAck and drops
  // `msgID`: every attempt failed on the missing ack and stored another copy, never deduplicated, forever.
  if (isCoreConnection(js)) {
    throw new InvalidOptionsError(
      'natsPublisher: `js` is a NATS connection, not a JetStream client: pass jetstream(nc). The ' +
        "connection's publish neither waits for the stream's PubAck nor sends Nats-Msg-Id, so each attempt " +
        'would store another copy and the row would never be marked sent',
    );
  }
  knownFields(options, 'natsPublisher', PUBLISHER_FIELDS);
  const subject = options.subject ?? ((message: OutboxMessage) => message.topic);
  if (typeof subject !== 'function') {
    throw new InvalidOptionsError('natsPublisher: `subject` must be a function of the message');
  }
  const { timeoutMs } = options;
  // Checked, not handed to the client as it is: NaN or a negative timeout fails every publish (or never
  // times out), and the rows keep failing with a confusing error.
  if (
    timeoutMs !== undefined &&
    (typeof timeoutMs !== 'number' || !(timeoutMs > 0) || timeoutMs > MAX_TIMER_MS)
  ) {
    throw new InvalidOptionsError(
      `natsPublisher: timeoutMs must be a positive number of ms, got ${shownValue(timeoutMs)}`,
    );
  }
  return {
    async publish(message) {
      const make = options.headers ?? (await defaultHeaders());
      const headers = make();
      for (const [name, value] of Object.entries(message.headers)) {
        try {
          headers.set(name, value);
        } catch (error) {
          // NATS headers are stricter than the outbox's (RabbitMQ and Redis Streams take these): a name
          // must be a token, a value has no CR or LF. Say which header, since the row fails every attempt.
          throw new Error(
            `NATS cannot carry header ${JSON.stringify(name)} of message ${message.id} (header names ` +
              'must be tokens, values without CR or LF): enqueue it with NATS-safe headers',
            { cause: error },
          );
        }
      }
      headers.set('Content-Type', message.contentType);
      headers.set('Outbox-Topic', message.topic);
      if (message.key !== null) headers.set(NATS_KEY_HEADER, message.key);
      const to = subject(message);
      let ack: NatsPubAckLike;
      try {
        ack = await js.publish(to, message.payload, {
          msgID: message.id,
          headers,
          ...(timeoutMs === undefined ? {} : { timeout: timeoutMs }),
        });
      } catch (error) {
        // The client's size refusal names neither the size nor the limit, and its "jetstream is not
        // enabled" for a subject no stream captures names neither: say what each one means.
        throw natsNoStreamError(natsPayloadError(error, message, js, headers), message, to);
      }
      // Not a PubAck (a client whose publish does not wait for the stream): the publish is not confirmed.
      if (typeof ack !== 'object' || ack === null || typeof ack.seq !== 'number') {
        throw new Error(
          `publishing message ${message.id}: the JetStream client's publish resolved without a PubAck`,
        );
      }
      if (ack.duplicate) {
        try {
          ignoreRejection(options.onDuplicate?.(message, ack));
        } catch {
          // The message is published: a throwing (or rejecting) hook must not have it published again.
        }
      }
    },
  };
}

// A core NatsConnection (`connect()`), told from a JetStream client (`jetstream(nc)`, or nats.js v2's
// `nc.jetstream()`) by the request/flush pair only a connection has.
function isCoreConnection(js: object): boolean {
  const candidate = js as { request?: unknown; flush?: unknown };
  return typeof candidate.request === 'function' && typeof candidate.flush === 'function';
}
