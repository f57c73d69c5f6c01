/**
 * The options every idempotent consumer shares (RabbitMQ, NATS JetStream, Redis Streams), the handler's
 * signature and context, the hooks, and their validation into one resolved form.
 * @module
 */
import { type Duration, MAX_TIMER_MS, toMs } from '../core/duration.js';
import {
  createIdempotency,
  type Idempotency,
  type IdempotencyOptions,
  type RunContext,
} from '../core/engine.js';
import type { StoredErrorInfo } from '../core/errors.js';
import { InvalidOptionsError } from '../core/errors.js';
import {
  booleanOption,
  callbacksOption,
  durationOption,
  knownFields,
  positiveIntegerOption,
  shownValue,
} from '../core/option-checks.js';
import { ReservedScopePrefix } from '../core/reserved-scopes.js';
import { enableAsyncContext } from '../http/context.js';
import { type Backoff, type BackoffOptions, createBackoff } from './backoff.js';
import type { DeadLetterReason, DecisionPolicy, RetryReason } from './decision.js';
import { hookCalls } from './hook-calls.js';
import { LateSettles } from './late-settles.js';

/** Extracts the idempotency key of a message; `undefined` when it has none (it is then dead-lettered). */
export type KeyExtractor<M> = (message: M) => string | undefined;

/** What a consumer's handler receives besides the message. */
export interface ConsumerContext {
  /** The idempotency key of the message (before scoping). */
  key: string;
  /** Deliveries of this message so far, this one included. */
  deliveryCount: number;
  /** Aborts, with a `LeaseLostError` reason, when this execution's lease is lost: stop side effects. */
  signal: AbortSignal;
  /** Fencing token of this execution; pass it to writes that can check it. */
  token: number;
  /** 1 for the first execution of the key, more after takeovers of crashed attempts. */
  attempt: number;
  /** Extend the lease now (it is also extended automatically). */
  extendLease: RunContext['extendLease'];
  /** A stable key for a downstream provider's own deduplication, the same on every attempt. */
  downstreamKey(step: string): string;
  /**
   * Run a named step once per message: a redelivery that takes over a crashed attempt gets the step's
   * recorded result instead of running it again (see `RunContext.step`).
   */
  step: RunContext['step'];
}

/** The user's message handler. Its return value is not stored: consumers only need "done". */
export type ConsumerHandler<M> = (
  message: M,
  context: ConsumerContext,
) => Promise<unknown> | unknown;

/** What each consumer hook receives. */
export interface ConsumerEvent<M> {
  /** The consumer's name (the scope of its keys). */
  consumer: string;
  /** The broker's message. */
  message: M;
  /** The extracted key, when there is one. */
  key: string | undefined;
  /** Deliveries of this message so far, this one included. */
  deliveryCount: number;
}

/**
 * Observation callbacks; a hook that throws is ignored. None is called once the consumer's `close()`
 * resolved, whatever it resolved: work a drain that timed out left running goes on unreported.
 */
export interface ConsumerHooks<M> {
  /** The handler ran, its completion is durable, and the message was acked. */
  onExecuted?(event: ConsumerEvent<M>): void;
  /**
   * A duplicate of a completed message was acked without running the handler; or (Redis Streams) a dead
   * letter's write found the message settled by another delivery, and wrote nothing.
   */
  onDuplicate?(event: ConsumerEvent<M>): void;
  /** The message will be redelivered after `delayMs`. */
  onRetry?(
    event: ConsumerEvent<M> & { reason: RetryReason; delayMs: number; error?: unknown },
  ): void;
  /**
   * The message was dead-lettered with `error` recorded: once per letter written, also late, for a write
   * given up on after `brokerTimeout` (reported to `onBrokerError` then) that lands after all, unless the
   * consumer's `close()` resolved first: `close()` waits for such a write within `drainTimeout`, and
   * resolves `false` when it has not landed by then.
   */
  onDeadLetter?(
    event: ConsumerEvent<M> & { reason: DeadLetterReason; error: StoredErrorInfo },
  ): void;
  /**
   * An operation on a delivery failed, and the message was kept rather than lost. `operation` is `ack`,
   * `retry` or `dead_letter` (a broker operation: RabbitMQ refused or returned the copy, say, or one that
   * did not answer within `brokerTimeout`, or a dead letter's record that did not answer within
   * `storeTimeout`), `touch` (a keep-alive call that failed or
   * is overdue), `release` (a failed handler's claim whose release did not answer within `storeTimeout`),
   * or `process`: processing itself threw (an `isPermanentError` or `backoff` that threw, or a bug), and
   * the delivery was settled as a handler error.
   */
  onBrokerError?(event: ConsumerEvent<M> & { operation: string; error: unknown }): void;
  /**
   * The consumer as a whole hit an error, outside any one delivery: its message loop ended (NATS: the
   * JetStream consumer or its stream was deleted, or the connection closed: `consume`), or a read failed
   * and is retried (NATS: `fetch`; Redis Streams: `read`, `create-group` when re-creating a deleted
   * group). RabbitMQ reports channel loss through the channel's own events instead.
   */
  onConsumerError?(event: ConsumerErrorEvent): void;
}

/** What {@link ConsumerHooks.onConsumerError} receives. */
export interface ConsumerErrorEvent {
  /** The consumer's name. */
  consumer: string;
  /** What failed; the adapter's hook type lists its values. */
  operation: string;
  /** The error. */
  error: unknown;
}

/** Options shared by every idempotent consumer. */
export interface ConsumerOptions<M> {
  /** An engine from `createIdempotency`, or the options to create one (`{ store, ... }`). */
  idempotency: Idempotency | IdempotencyOptions;
  /**
   * The consumer's name. Keys are scoped by it, so the same key in an HTTP API's records, or in another
   * consumer's, never collides with this consumer's.
   */
  name: string;
  /** How to get a message's idempotency key. @default the adapter's (message id, then a header) */
  key?: KeyExtractor<M>;
  /**
   * Fingerprint of a message: the same key with a different fingerprint is dead-lettered as misuse.
   * Payload hashing is opt-in. @default no fingerprint (the key alone identifies a message)
   */
  fingerprint?: (message: M) => string | undefined;
  /**
   * Deliveries allowed before a message whose handler keeps failing is dead-lettered. Counts every delivery
   * the broker reports, redeliveries while another consumer held the key included. @default 5
   */
  maxDeliveries?: number;
  /**
   * Delay before redelivering after a handler error: `{ initial, max, factor, jitter }` (no other field:
   * the outbox relay's `initialMs`, `maxMs` and `multiplier` are refused) or a function of the delivery
   * count. @default { initial: '1s', factor: 2, max: '1m', jitter: true }
   */
  backoff?: BackoffOptions | Backoff;
  /** Shortest delay of an in-progress or store-unavailable redelivery. @default '100ms' */
  minRetryDelay?: Duration;
  /** Longest delay of an in-progress or store-unavailable redelivery. @default '30s' */
  maxRetryDelay?: Duration;
  /** Errors to dead-letter at once, without retries (validation errors, say). @default none */
  isPermanentError?: (error: unknown) => boolean;
  /** Messages handled at the same time (and the broker prefetch). @default 10 */
  concurrency?: number;
  /** The store lease of one execution; overrides the engine's. @default the engine's ('30s') */
  lease?: Duration;
  /** How long a completed key is remembered; must exceed the longest redelivery and DLQ replay horizon. @default the engine's ('24h') */
  retention?: Duration;
  /**
   * How long `close()` waits for in-flight messages, and for the retries and dead letters their
   * deliveries gave up on after `brokerTimeout`: at most 2³¹−1 ms (about 24.8 days), a timer's limit.
   * @default '30s'
   */
  drainTimeout?: Duration;
  /**
   * The longest the consumer waits for one of its own store calls (the claim before the handler, the
   * release after a handler error, a dead letter's record), at most 2³¹−1 ms: past it the delivery is
   * handed back as a store-unavailable redelivery (never acked) and its handler slot freed. The
   * completion after a handler ran is waited for the execution's lease (the engine retries it for as
   * long) plus this. A claim that answers after it was given up is released, never run. Matters for a
   * store without timeouts of its own, or a connection hung without a command timeout: the shipped
   * stores time their calls out sooner (Redis `timeoutMs`, say). @default the lease (`lease`, else the
   * engine options' `leaseMs`, else 30 s)
   */
  storeTimeout?: Duration;
  /**
   * The longest the consumer waits for one of the broker calls that settle a delivery (a Redis Streams
   * `XACK`, `XCLAIM` or dead letter's `XADD`, a RabbitMQ retry or dead-letter copy's confirm, a NATS
   * dead letter's PubAck), at most 2³¹−1 ms: past it the call is reported to `onBrokerError` (operation
   * `ack`, `retry` or `dead_letter`) and the delivery's handler slot freed. Nothing is acked that was not
   * settled: the call goes on, and what it does if it answers later (a copy confirmed, then its original
   * acked) is what the redelivery meets; a dead letter given up on is not written a second way (see the
   * docs). Matters for a connection hung without a command timeout (ioredis's default, node-redis with
   * `commandOptions.timeout: 0`), a confirm that never comes, or a publisher with a long request timeout.
   * @default `storeTimeout`
   */
  brokerTimeout?: Duration;
  /**
   * Observation callbacks. None is called once `close()` resolved: what a drain that timed out left
   * running goes on (a late ack, a dead letter landing), unreported.
   */
  hooks?: ConsumerHooks<M>;
  /**
   * Make `currentIdempotency()` work anywhere in the handler's call tree (AsyncLocalStorage), as the HTTP
   * middleware's option does: it returns the handler's own context (the same key, token, attempt,
   * `signal`, `extendLease`, `downstreamKey` and `step`) with the consumer's `scope` and the
   * `storageKey`, so a helper shared with HTTP routes carries the message's key. Off by default because
   * on Node 20 and 22 it slows every promise in the process; the context argument is always free.
   * @default false
   */
  asyncContext?: boolean;
}

// Every key of ConsumerOptions, checked by the compiler both ways (`satisfies`): a new option cannot be
// left out of this list, nor a removed one stay in it.
const CONSUMER_OPTION_FIELDS = {
  idempotency: true,
  name: true,
  key: true,
  fingerprint: true,
  maxDeliveries: true,
  backoff: true,
  minRetryDelay: true,
  maxRetryDelay: true,
  isPermanentError: true,
  concurrency: true,
  lease: true,
  retention: true,
  drainTimeout: true,
  storeTimeout: true,
  brokerTimeout: true,
  hooks: true,
  asyncContext: true,
} as const satisfies Record<keyof ConsumerOptions<unknown>, true>;

/** The names of {@link ConsumerOptions}, which every consumer accepts beside its own. */
export const CONSUMER_OPTION_NAMES: readonly string[] = Object.keys(CONSUMER_OPTION_FIELDS);

/**
 * How a consumer names itself and its own options, for {@link resolveConsumerOptions}'s check of the
 * option names.
 */
export interface ConsumerOptionNames {
  /** The consumer, as messages name it: `idempotentConsumer (RabbitMQ)`. */
  who: string;
  /** The option names the consumer adds to {@link ConsumerOptions}. */
  own: readonly string[];
}

// A consumer without options of its own (the shared tests' and a custom adapter's).
const SHARED_ONLY: ConsumerOptionNames = { who: 'idempotentConsumer', own: [] };

/** The engine's `leaseMs` when its options give none (`createIdempotency`'s default). */
const DEFAULT_ENGINE_LEASE = '30s';

/**
 * The lease assumed for an execution whose lease cannot be known: an engine instance of the user's own
 * making, or of another copy of this package, and no `lease` on the consumer. The engine's default.
 */
export const UNKNOWN_LEASE_MS = 30_000;

// A function option, or absent. A string where a function belongs (`key: 'x-idempotency-key'`, a header
// name) would otherwise fail on the first message, and every message after it, as a handler error.
function functionOption<F>(value: F | undefined | null, name: string): F | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'function') {
    throw new InvalidOptionsError(`${name}: expected a function, got ${shownValue(value)}`);
  }
  return value;
}

/** {@link ConsumerOptions} validated and with defaults applied. */
export interface ResolvedConsumerOptions<M> {
  engine: Idempotency;
  name: string;
  scope: string;
  key: KeyExtractor<M>;
  fingerprint: ((message: M) => string | undefined) | undefined;
  policy: DecisionPolicy;
  concurrency: number;
  leaseMs: number | undefined;
  /**
   * The lease of an execution when known (the consumer's `lease`, else the `leaseMs` of the engine options
   * given, else their default): how long, at most, a delivery's broker timer is kept alive after its
   * handler settled, while the engine retries a failed completion. `undefined` with an engine instance
   * and no `lease`: the lease the run itself was claimed with bounds it then (process.ts).
   */
  settleKeepAliveMs: number | undefined;
  retentionMs: number | undefined;
  drainTimeoutMs: number;
  /** The bound on each of the consumer's own store calls (see {@link ConsumerOptions.storeTimeout}). */
  storeTimeoutMs: number;
  /** The bound on each broker call settling a delivery (see {@link ConsumerOptions.brokerTimeout}). */
  brokerTimeoutMs: number;
  /**
   * The application's hooks as the consumer calls them: silent once {@link endHooks} was called
   * (hook-calls.ts). Every call into the hooks, the adapters' own included, goes through these.
   */
  hooks: ConsumerHooks<M>;
  /** Ends every call into {@link hooks}, for good: the adapter calls it as its `close()` resolves. */
  endHooks(): void;
  /** Whether the handler runs with its `currentIdempotency()` context (async-context.ts). */
  asyncContext: boolean;
  /**
   * The settle calls given up on after `brokerTimeout` that are still going (late-settles.ts): settle.ts
   * adds them, and the adapter's `close()` waits for them within `drainTimeout`, before {@link endHooks}.
   */
  lateSettles: LateSettles;
}

/** True when `value` is an engine rather than engine options. */
function isEngine(value: Idempotency | IdempotencyOptions): value is Idempotency {
  return typeof (value as Partial<Idempotency>).run === 'function';
}

/**
 * The scope every key of consumer `name` is stored under. Reserved: no HTTP scope can address it
 * (core/reserved-scopes.ts).
 */
export function consumerScope(name: string): string {
  return `${ReservedScopePrefix.Consumer}${name}`;
}

/**
 * Validate `options` and apply defaults.
 * @param names - The consumer's name and its own option names: any other field is refused, since a
 *   misspelt one (`maxDelivery`) would leave its default in force without a word.
 * @throws InvalidOptionsError when an option is missing, unknown, of the wrong type or out of range.
 */
export function resolveConsumerOptions<M>(
  options: ConsumerOptions<M>,
  defaultKey: KeyExtractor<M>,
  names: ConsumerOptionNames = SHARED_ONLY,
): ResolvedConsumerOptions<M> {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionsError(
      `${names.who}: expected an object of options, got ${shownValue(options)}`,
    );
  }
  knownFields(options, names.who, [...CONSUMER_OPTION_NAMES, ...names.own]);
  if (options.idempotency === undefined || options.idempotency === null) {
    throw new InvalidOptionsError('idempotency: an engine or { store } is required');
  }
  if (typeof options.name !== 'string' || options.name.length === 0) {
    throw new InvalidOptionsError(
      'name: every consumer needs a non-empty name (the scope of its keys)',
    );
  }
  // Checked with the other options, and turned on process-wide only for a consumer that validated.
  const asyncContext = booleanOption(options.asyncContext, 'asyncContext');
  // Checked with the other options; wrapped so that close() can end every call into them.
  const calls = hookCalls(callbacksOption<ConsumerHooks<M>>(options.hooks, 'hooks') ?? {});
  const engine = isEngine(options.idempotency)
    ? options.idempotency
    : createIdempotency(options.idempotency);
  const leaseMs = options.lease === undefined ? undefined : toMs(options.lease, 'lease');
  const minRetryDelayMs = toMs(options.minRetryDelay ?? '100ms', 'minRetryDelay');
  const maxRetryDelayMs = toMs(options.maxRetryDelay ?? '30s', 'maxRetryDelay');
  if (maxRetryDelayMs < minRetryDelayMs) {
    throw new InvalidOptionsError('maxRetryDelay: must not be shorter than minRetryDelay');
  }
  const settleKeepAliveMs =
    leaseMs ??
    (isEngine(options.idempotency)
      ? undefined
      : toMs(options.idempotency.leaseMs ?? DEFAULT_ENGINE_LEASE, 'idempotency.leaseMs'));
  // A timer too. The default, a lease, may be longer than a timer can wait (a lease of weeks): capped.
  const storeTimeoutMs = durationOption(
    options.storeTimeout,
    'storeTimeout',
    Math.min(settleKeepAliveMs ?? UNKNOWN_LEASE_MS, MAX_TIMER_MS),
    { maxMs: MAX_TIMER_MS },
  );
  return {
    engine,
    name: options.name,
    scope: consumerScope(options.name),
    key: functionOption(options.key, 'key') ?? defaultKey,
    fingerprint: functionOption(options.fingerprint, 'fingerprint'),
    policy: {
      maxDeliveries: positiveIntegerOption(options.maxDeliveries, 'maxDeliveries', 5),
      backoff: createBackoff(options.backoff),
      minRetryDelayMs,
      maxRetryDelayMs,
      isPermanentError:
        functionOption(options.isPermanentError, 'isPermanentError') ?? (() => false),
    },
    concurrency: positiveIntegerOption(options.concurrency, 'concurrency', 10),
    leaseMs,
    settleKeepAliveMs,
    retentionMs: options.retention === undefined ? undefined : toMs(options.retention, 'retention'),
    // A timer: past MAX_TIMER_MS Node fires it at once, and close() would give up on every message in
    // flight straight away.
    drainTimeoutMs: durationOption(options.drainTimeout, 'drainTimeout', 30_000, {
      maxMs: MAX_TIMER_MS,
    }),
    storeTimeoutMs,
    // A timer too. A settle normally answers in milliseconds; one that has not within what a store call
    // gets is hung, not slow.
    brokerTimeoutMs: durationOption(options.brokerTimeout, 'brokerTimeout', storeTimeoutMs, {
      maxMs: MAX_TIMER_MS,
    }),
    hooks: calls.hooks,
    endHooks: calls.end,
    lateSettles: new LateSettles(),
    asyncContext: enabledAsyncContext(asyncContext),
  };
}

/** `asyncContext`, turned on process-wide when true (`currentIdempotency()` then stops throwing). */
function enabledAsyncContext(asyncContext: boolean): boolean {
  if (asyncContext) enableAsyncContext();
  return asyncContext;
}
