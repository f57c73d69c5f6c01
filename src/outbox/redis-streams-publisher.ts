/**
 * Redis Streams publisher: `XADD` with the stable id in a field. Redis has no broker-side dedup, so a
 * re-send appends a second entry with the same `x-idempotency-key`: the idempotent consumer deduplicates it. No
 * runtime import of node-redis or ioredis.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import { knownFields, positiveIntegerOption, shownValue } from '../core/option-checks.js';
import type { OutboxMessage } from './message.js';
import type { Publisher } from './publisher.js';

/** A connected node-redis (v5+) client: `createClient(…)` after `connect()`. */
export interface NodeRedisLike {
  /** Send a raw command. */
  sendCommand(args: ReadonlyArray<string | Buffer>): Promise<unknown>;
}

/** A connected ioredis (v5+) client: `new Redis(…)`. */
export interface IoRedisLike {
  /** Send a raw command. */
  call(command: string, ...args: Array<string | Buffer | number>): Promise<unknown>;
}

/** Options of {@link redisStreamsPublisher}. */
export interface RedisStreamsPublisherOptions {
  /** A connected node-redis or ioredis client (not a cluster client: pass one node's client there). */
  client: NodeRedisLike | IoRedisLike;
  /**
   * The stream a message is appended to: a stream name (every message goes to that one stream), or a
   * function of the message giving it. @default (message) => message.topic
   */
  stream?: string | ((message: OutboxMessage) => string);
  /**
   * Cap each stream at about this many entries (`MAXLEN ~`); unbounded when absent. Trimming drops the
   * oldest entries whether or not a consumer group has read them: a consumer lagging by more than this
   * loses messages, so keep it far above the worst backlog.
   */
  maxLen?: number;
}

/** The field names of each stream entry. */
export const RedisStreamField = {
  /**
   * The stable message id: the field the Redis Streams idempotent consumer reads its key from by default
   * (the entry id, its fallback, differs on every re-send and would not deduplicate).
   */
  MessageId: 'x-idempotency-key',
  Topic: 'topic',
  /** Present only when the message has a key. */
  Key: 'key',
  ContentType: 'content-type',
  /** The message's headers as a JSON object. */
  Headers: 'headers',
  /** The payload bytes. */
  Payload: 'payload',
} as const;

/** The fields of {@link RedisStreamsPublisherOptions}. */
const PUBLISHER_FIELDS = ['client', 'stream', 'maxLen'];

/**
 * The stream of each message: a fixed name, or a function of the message. Checked when the publisher is
 * created: anything else would fail every publish, and the relay would retry the row forever.
 */
function streamOption(value: unknown): (message: OutboxMessage) => string {
  if (value === undefined || value === null) return (message) => message.topic;
  if (typeof value === 'function') return value as (message: OutboxMessage) => string;
  if (typeof value === 'string' && value !== '') return () => value;
  throw new InvalidOptionsError(
    `redisStreamsPublisher: stream: expected a stream name or a function of the message, got ${shownValue(value)}`,
  );
}

/**
 * Create a Redis Streams publisher. A publish resolves with Redis's reply to `XADD` (the entry id): the
 * entry is in the primary's memory; like every Redis write it may be lost on a failover before replication.
 * @example
 * const publisher = redisStreamsPublisher({ client: redis, maxLen: 100_000 });
 * const audit = redisStreamsPublisher({ client: redis, stream: 'audit' }); // every message to one stream
 */
export function redisStreamsPublisher(options: RedisStreamsPublisherOptions): Publisher {
  const client = options?.client as Partial<NodeRedisLike & IoRedisLike> | undefined;
  // ioredis has a `sendCommand` of its own with another signature, so it is recognised by `call` first.
  const send =
    typeof client?.call === 'function'
      ? (args: Array<string | Buffer>) =>
          (client as IoRedisLike).call(args[0] as string, ...args.slice(1))
      : typeof client?.sendCommand === 'function'
        ? (args: Array<string | Buffer>) => (client as NodeRedisLike).sendCommand(args)
        : undefined;
  if (send === undefined) {
    throw new InvalidOptionsError(
      'redisStreamsPublisher: `client` must be a node-redis or ioredis client',
    );
  }
  knownFields(options, 'redisStreamsPublisher', PUBLISHER_FIELDS);
  const stream = streamOption(options.stream);
  // No default: without maxLen (or with null, "not given" as everywhere) the stream is not trimmed.
  const maxLen =
    options.maxLen === undefined || options.maxLen === null
      ? undefined
      : positiveIntegerOption(options.maxLen, 'redisStreamsPublisher: maxLen', 1);
  return {
    async publish(message) {
      const args: Array<string | Buffer> = ['XADD', stream(message)];
      if (maxLen !== undefined) args.push('MAXLEN', '~', String(maxLen));
      args.push('*', RedisStreamField.MessageId, message.id, RedisStreamField.Topic, message.topic);
      if (message.key !== null) args.push(RedisStreamField.Key, message.key);
      args.push(
        RedisStreamField.ContentType,
        message.contentType,
        RedisStreamField.Headers,
        JSON.stringify(message.headers),
        RedisStreamField.Payload,
        Buffer.from(message.payload.buffer, message.payload.byteOffset, message.payload.byteLength),
      );
      const reply = await send(args);
      if (reply === null || reply === undefined) {
        throw new Error(`XADD to ${stream(message)} returned no entry id`);
      }
    },
  };
}
