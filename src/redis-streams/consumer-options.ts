/**
 * The options of the Redis Streams consumer beyond the shared ones, its hooks and its error event, and
 * their validation into one resolved form ({@link resolveStreamsOptions}).
 * @module
 */
import { hostname } from 'node:os';
import type { ConsumerHooks, ConsumerOptions } from '../consumer/index.js';
import { type ResolvedConsumerOptions, resolveConsumerOptions } from '../consumer/options.js';
import { type Duration, MAX_TIMER_MS, toMs } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import {
  callbacksOption,
  durationOption,
  positiveIntegerOption,
  stringOption,
} from '../core/option-checks.js';
import { isStreamsClient, type RedisStreamsClient, type StreamEntry } from './redis-client.js';
import { defaultStreamKey } from './stream-key.js';

/**
 * Shortest `minIdle` accepted. Entries being handled have their idle time reset every `minIdle / 3`; much
 * below this, `XAUTOCLAIM` takes entries from live consumers between two resets (each time counting a
 * delivery), and every redelivery delay, capped at `minIdle`, becomes a busy loop.
 */
export const MIN_IDLE_FLOOR_MS = 100;

/** A failure of the consumer as a whole rather than of one message. */
export interface RedisStreamsConsumerErrorEvent {
  /** The consumer's name. */
  consumer: string;
  /**
   * What failed: `read` (an `XREADGROUP` or `XAUTOCLAIM`; the loop waits and tries again; or one of the
   * loop's commands unanswered past `brokerTimeout`, its wait (at most `block`) more for a blocking read: a
   * `BrokerTimeoutError`, and the loop waits for its answer), `create-group` (re-creating a group found
   * missing), or `deleted`: an entry was deleted from the stream (`XDEL`, `XTRIM`, `XADD … MAXLEN`) while
   * pending, so the message is lost to the group (an `EntryDeletedError`, and `entryId` set; also the
   * failure to record it in the dead-letter stream, with the same `entryId`).
   */
  operation: 'read' | 'create-group' | 'deleted';
  /** The error (a lost connection, `NOGROUP`, an `EntryDeletedError`, …). */
  error: unknown;
  /** With operation `deleted`: the id of the entry deleted while pending. */
  entryId?: string;
}

/** The shared consumer hooks, plus the one for failures of the consumer as a whole. */
export interface RedisStreamsConsumerHooks extends ConsumerHooks<StreamEntry> {
  /**
   * A read failed (the loop goes on after a pause), or the group was missing (`NOGROUP`: the group or the
   * stream was deleted) and is re-created. Never called for one message's own operations: those go to
   * `onBrokerError`.
   */
  onConsumerError?(event: RedisStreamsConsumerErrorEvent): void;
}

/** Options of `idempotentConsumer` for Redis Streams. */
export interface RedisStreamsConsumerOptions extends ConsumerOptions<StreamEntry> {
  /** Observation callbacks. */
  hooks?: RedisStreamsConsumerHooks;
  /** The stream key. */
  stream: string;
  /**
   * The consumer group: created at `'0'` with `MKSTREAM` if missing at start. If it goes missing while the
   * consumer runs, it is re-created after the last entry this consumer read, or, if it read none, where the
   * group stood when the consumer started (see the docs).
   */
  group: string;
  /** This process's consumer name within the group. @default `${name}-${hostname}-${pid}` */
  consumer?: string;
  /**
   * A second connection for the blocking `XREADGROUP … BLOCK`, so acks never wait behind it. Without
   * one, the consumer polls `client` every `pollInterval`.
   */
  blockingClient?: RedisStreamsClient;
  /** Longest wait of one blocking read; never past the next claim round (`claimInterval`). @default '1s' */
  block?: Duration;
  /**
   * Wait between empty reads when there is no `blockingClient`, never past the next claim round
   * (`claimInterval`): at most 2³¹−1 ms (about 24.8 days), a timer's limit. @default '50ms'
   */
  pollInterval?: Duration;
  /**
   * A pending entry idle this long is reclaimed (`XAUTOCLAIM`) by any consumer of the group: how a crashed
   * consumer's messages come back, and the longest redelivery delay. At least 100 ms
   * ({@link MIN_IDLE_FLOOR_MS}). @default '30s'
   */
  minIdle?: Duration;
  /** How often this consumer looks for reclaimable entries. @default '1s' */
  claimInterval?: Duration;
  /** Where dead letters are added (fields + error fields); not `stream` itself. @default `${stream}:dlq` */
  deadLetterStream?: string;
  /**
   * Keep about this many letters in `deadLetterStream`: each letter is added with `MAXLEN ~ n`, so the
   * oldest go once it is past that (Redis trims whole nodes of the stream, `stream-node-max-entries`, 100
   * by default: it may hold up to about that many more). A positive integer. Unbounded by default: a
   * letter is the only record of a message given up on (and, for an entry deleted while pending, of its
   * fields), and a burst of failures would trim away letters nobody has looked at yet. Set it where Redis
   * memory matters more than the oldest letters, and alert on `onDeadLetter`. @default unbounded
   */
  deadLetterMaxLen?: number;
}

// The options RedisStreamsConsumerOptions adds to the shared ones, checked by the compiler both ways.
const STREAMS_OPTION_FIELDS = {
  stream: true,
  group: true,
  consumer: true,
  blockingClient: true,
  block: true,
  pollInterval: true,
  minIdle: true,
  claimInterval: true,
  deadLetterStream: true,
  deadLetterMaxLen: true,
} as const satisfies Record<
  Exclude<keyof RedisStreamsConsumerOptions, keyof ConsumerOptions<StreamEntry>>,
  true
>;
const STREAMS_OPTION_NAMES = {
  who: 'idempotentConsumer (Redis Streams)',
  own: Object.keys(STREAMS_OPTION_FIELDS),
};

/** The consumer's options, checked, with their defaults. */
export interface ResolvedStreamsOptions {
  /** The shared options, resolved. */
  resolved: ResolvedConsumerOptions<StreamEntry>;
  /** The connection for blocking reads, if any: without it the consumer polls `client`. */
  blockingClient: RedisStreamsClient | undefined;
  stream: string;
  group: string;
  /** This process's consumer name within the group. */
  consumer: string;
  blockMs: number;
  pollMs: number;
  minIdleMs: number;
  claimMs: number;
  deadLetterStream: string;
  /** The approximate bound of `deadLetterStream` (`MAXLEN ~`), if any: undefined keeps every letter. */
  deadLetterMaxLen: number | undefined;
}

/**
 * Check `options` (and `client`) and resolve them, with their defaults; throws an `InvalidOptionsError`
 * naming the first option that is wrong.
 */
export function resolveStreamsOptions(
  client: RedisStreamsClient,
  options: RedisStreamsConsumerOptions,
): ResolvedStreamsOptions {
  const resolved = resolveConsumerOptions(options, defaultStreamKey, STREAMS_OPTION_NAMES);
  if (!isStreamsClient(client)) {
    throw new InvalidOptionsError('client: pass a connected node-redis or ioredis client');
  }
  // null is "not given", as everywhere: the consumer then polls `client`.
  const blockingClient = options.blockingClient ?? undefined;
  if (blockingClient !== undefined && !isStreamsClient(blockingClient)) {
    throw new InvalidOptionsError('blockingClient: pass a connected node-redis or ioredis client');
  }
  const stream = stringOption(options.stream, 'stream', '');
  const group = stringOption(options.group, 'group', '');
  if (!stream || !group) throw new InvalidOptionsError('stream and group are required');
  const consumer = stringOption(
    options.consumer,
    'consumer',
    `${options.name}-${hostname()}-${process.pid}`,
  );
  callbacksOption<RedisStreamsConsumerHooks>(options.hooks, 'hooks');
  const blockMs = toMs(options.block ?? '1s', 'block');
  // A timer: past MAX_TIMER_MS Node fires it at once, and the stream would be read in a loop.
  const pollMs = durationOption(options.pollInterval, 'pollInterval', 50, { maxMs: MAX_TIMER_MS });
  const minIdleMs = toMs(options.minIdle ?? '30s', 'minIdle');
  if (minIdleMs < MIN_IDLE_FLOOR_MS) {
    throw new InvalidOptionsError(
      `minIdle: must be at least ${MIN_IDLE_FLOOR_MS}ms, got ${minIdleMs}ms (entries being handled are reset every minIdle / 3)`,
    );
  }
  const claimMs = toMs(options.claimInterval ?? '1s', 'claimInterval');
  const deadLetterStream = stringOption(
    options.deadLetterStream,
    'deadLetterStream',
    `${stream}:dlq`,
  );
  if (deadLetterStream === '') {
    throw new InvalidOptionsError('deadLetterStream: must be a stream name, got ""');
  }
  if (deadLetterStream === stream) {
    // Each dead letter would be read again as a new entry, fail again, and be dead-lettered again.
    throw new InvalidOptionsError('deadLetterStream: must not be the consumed stream itself');
  }
  // 0 would trim every letter away as it is written: refused, as any count that is not a positive integer.
  const deadLetterMaxLen =
    options.deadLetterMaxLen === undefined || options.deadLetterMaxLen === null
      ? undefined
      : positiveIntegerOption(options.deadLetterMaxLen, 'deadLetterMaxLen', 1);
  return {
    resolved,
    blockingClient,
    stream,
    group,
    consumer,
    blockMs,
    pollMs,
    minIdleMs,
    claimMs,
    deadLetterStream,
    deadLetterMaxLen,
  };
}
