/**
 * The engine: validate the key → derive the storage key → claim → run `fn` under a lease → complete or
 * release. Knows nothing of HTTP or brokers; adapters turn requests and messages into {@link RunRequest}s.
 * @module
 */
import { type BatchingOptions, withBatching } from '../store/batching.js';
import type { Store } from '../store/store.js';
import { isAbandonedClaimError } from './abandoned-claim.js';
import { type Clock, monotonicClock, systemClock } from './clock.js';
import { isClosedClientError } from './closed-client.js';
import { CompletedCache, DEFAULT_CACHE_MAX_BYTES } from './completed-cache.js';
import { type Duration, toMs } from './duration.js';
import {
  InvalidOptionsError,
  isReplicationShortError,
  isStoreUnavailableError,
  LeaseLostError,
  OutcomeEncodingError,
  StoreUnavailableError,
} from './errors.js';
import { createFingerprint } from './fingerprint.js';
import { Heartbeats } from './heartbeat.js';
import { emit, type HookEvent, type IdempotencyHooks } from './hooks.js';
import { inspectKey, type KeyInspection } from './inspection.js';
import { deriveDownstreamKey, validateKey } from './key.js';
import { type LeaseEnvironment, LeaseKeeper } from './lease.js';
import { lookupKey, type StorageKeyOptions } from './lookup-key.js';
import {
  booleanOption,
  callbacksOption,
  codecOption,
  knownFields,
  shownValue,
  storeErrorsOption,
  stringOption,
  switchOption,
} from './option-checks.js';
import {
  defaultCodec,
  encodeErrorOutcome,
  encodeValueOutcome,
  type OutcomeCodec,
} from './outcome.js';
import { type IdempotencyRecord, RecordStatus } from './record.js';
import { runStorageKey } from './reserved-scopes.js';
import { ExecutionContext } from './run-context.js';
import { settleRecord } from './settle.js';
import { type StepContext, type StepOptions, unrecordedSteps } from './steps.js';
import { isClaimResult, malformedAnswerError } from './store-answers.js';
import { isUnreportedRun, storeHooksOf } from './unreported-runs.js';

export type { StorageKeyOptions } from './lookup-key.js';

/**
 * Decides whether a thrown error is a final outcome (stored and replayed) or releases the claim. A
 * function that throws counts as `false`: the claim is released, as it is by default.
 */
export type StoreErrorsPolicy = boolean | ((error: unknown) => boolean);

/** Options of {@link createIdempotency}. */
export interface IdempotencyOptions {
  /** Where records live. */
  store: Store;
  /** Separates applications sharing one store; part of every storage key. @default 'default' */
  namespace?: string;
  /** How long a claim is held before another attempt may take over. @default '30s' */
  leaseMs?: Duration;
  /** How long a completed outcome is replayed. @default '24h' */
  retentionMs?: Duration;
  /**
   * Extend the lease automatically while `fn` runs: first after a third to a half of the lease, then about
   * every third of it. @default true
   */
  extendLease?: boolean;
  /**
   * The longest an execution keeps its claim alive through automatic extension (`extendLease`). A handler
   * still running after it is treated as hung: its `signal` aborts (within half a lease, with a
   * `LeaseLostError`), `extendLease()` rejects, and its lease is no longer extended, so the key can be
   * taken over by a retry at the latest one lease later. The handler itself is not stopped (JavaScript
   * cannot stop it): what it does after that may happen alongside the takeover, and its completion is
   * fenced out once the key was taken over. Without it, a handler that never settles holds its key for as
   * long as its process lives. @default no bound
   */
  maxExecution?: Duration;
  /** Run `fn` unprotected when the store is unreachable, instead of failing closed. @default false */
  failOpen?: boolean;
  /** Store thrown errors as final outcomes (replayed as `ReplayedError`) instead of releasing. @default false */
  storeErrors?: StoreErrorsPolicy;
  /**
   * When the store supports batches (`capabilities.batch`): the calls of one event-loop tick go together
   * at the end of that tick (a lone call alone); calls are sent at once while fewer than `maxInFlight` are
   * outstanding, and calls that arrive while the store is busy go together as one batch. Each item keeps
   * single-call semantics. While this process's event loop is busy, at most `maxInFlightWhenBusy` calls
   * are outstanding, and the calls of `windowWhenBusy` go together, so a CPU-bound service sends fewer,
   * larger batches. `false` sends every call alone.
   * @default { maxBatch: 100, maxInFlight: the store's `capabilities.batchMaxInFlight`, else 4,
   *   maxInFlightWhenBusy: the store's `capabilities.batchMaxInFlightWhenBusy`, else maxInFlight, window:
   *   the store's `capabilities.batchWindow`, else 'tick', windowWhenBusy: the store's
   *   `capabilities.batchWindowWhenBusy`, else window }
   */
  batch?: false | BatchingOptions;
  /**
   * Local LRU of completed records (by halves: the `maxEntries / 2` most recently used are always kept,
   * never more than `maxEntries`), and of at most `maxBytes` of outcomes and fingerprints (a record over
   * half of it is not cached); `false` disables it. @default { maxEntries: 1000, maxBytes: 16 MiB }
   */
  cache?: false | { maxEntries?: number; maxBytes?: number };
  /** Encodes outcomes for storage. @default defaultCodec (JSON, bytes, undefined) */
  codec?: OutcomeCodec;
  /** Observation callbacks (metrics, logs, traces). */
  hooks?: IdempotencyHooks;
  /**
   * Source of time, for tests. An injected clock also times the lease countdown and `maxExecution`; with
   * the system clock they run on `performance.now()`, which a wall-clock step does not move.
   * @default systemClock
   */
  clock?: Clock;
}

// Every key of IdempotencyOptions, checked by the compiler both ways (`satisfies`): a new option cannot be
// left out of this list, nor a removed one stay in it.
const ENGINE_OPTION_FIELDS = {
  store: true,
  namespace: true,
  leaseMs: true,
  retentionMs: true,
  extendLease: true,
  maxExecution: true,
  failOpen: true,
  storeErrors: true,
  batch: true,
  cache: true,
  codec: true,
  hooks: true,
  clock: true,
} as const satisfies Record<keyof IdempotencyOptions, true>;

/**
 * The names of {@link IdempotencyOptions}: {@link createIdempotency} refuses any other, and adapters that
 * take engine options beside their own accept these.
 */
export const ENGINE_OPTION_NAMES: readonly (keyof IdempotencyOptions)[] = Object.keys(
  ENGINE_OPTION_FIELDS,
) as (keyof IdempotencyOptions)[];

/** One call to make idempotent. */
export interface RunRequest {
  /** The client's idempotency key: 1–255 printable ASCII characters. */
  key: string;
  /** Who is calling (tenant, principal): records are never shared across scopes. @default '' */
  scope?: string;
  /** Fingerprint of the request; a different one with the same key is a `mismatch`. */
  fingerprint?: string;
  /** Data to fingerprint with {@link createFingerprint} when `fingerprint` is not given. */
  payload?: unknown;
  /** Overrides the engine's `leaseMs` for this call. */
  leaseMs?: Duration;
  /** Overrides the engine's `retentionMs` for this call. */
  retentionMs?: Duration;
  /** Overrides the engine's `failOpen` for this call. */
  failOpen?: boolean;
  /** Overrides the engine's `storeErrors` for this call. */
  storeErrors?: StoreErrorsPolicy;
  /** Overrides the engine's `codec` for this call. */
  codec?: OutcomeCodec;
}

/** What `fn` is given. */
export interface RunContext {
  /** Aborts, with a `LeaseLostError` reason, when this execution's lease is lost. */
  signal: AbortSignal;
  /** Fencing token of this execution; pass it to writes that can check it. */
  token: number;
  /** 1 for the first execution of the key, more after takeovers of crashed attempts. */
  attempt: number;
  /** The storage key (hashed). */
  storageKey: string;
  /**
   * Extend the lease now: it ends `leaseMs` after the store runs the call (default: the configured lease).
   * Automatic heartbeats never end it before the furthest end asked for this way. Rejects with
   * `LeaseLostError` if lost.
   */
  extendLease(leaseMs?: Duration): Promise<void>;
  /** A stable key for a downstream provider's own deduplication, the same on every attempt. */
  downstreamKey(step: string): string;
  /**
   * Run a named step once per request: its result is recorded on the claim, and an attempt that takes
   * over a crashed one (same request) gets the recorded result instead of running the step again. `fn`
   * gets the step's downstream key to pass to the provider it calls. Needs a store with
   * `capabilities.steps` (every built-in store); names match `[A-Za-z0-9._:-]{1,100}` and are unique
   * within an execution. A result the step's codec cannot encode (a BigInt) rejects with
   * `OutcomeEncodingError`, recorded as the step's outcome (a takeover's step rejects with its
   * `ReplayedError`); should `fn` then throw, that or its own error, a failure is stored as the key's final
   * outcome whatever `storeErrors` says, so the step never runs again. A step called once `fn` has
   * returned or thrown rejects with `LeaseLostError` without running: nothing could record it.
   * @example
   * const charge = await ctx.step('charge', ({ downstreamKey }) =>
   *   stripe.paymentIntents.create(params, { idempotencyKey: downstreamKey }),
   * );
   */
  step<S>(
    name: string,
    fn: (step: StepContext) => Promise<S> | S,
    options?: StepOptions,
  ): Promise<S>;
}

/** The result of {@link Idempotency.run}: an exhaustive union, switch on `status`. */
export type RunOutcome<T> =
  | { status: 'executed'; value: T; token: number; attempt: number; failedOpen: boolean }
  | { status: 'replayed'; value: T }
  /**
   * Another attempt holds the key: its lease ends in `retryAfterMs` (at least 1, at most this request's
   * `leaseMs`, however far this process's clock is from the store's).
   */
  | { status: 'in_progress'; retryAfterMs: number }
  | { status: 'mismatch' };

/** An engine bound to one store and namespace. */
export interface Idempotency {
  /** The store records live in. */
  readonly store: Store;
  /** The namespace part of every storage key. */
  readonly namespace: string;
  /**
   * Run `fn` at most once per (scope, key) while its outcome is retained.
   *
   * Rejects only with `InvalidKeyError`, `InvalidOptionsError` (a per-call override that is not one,
   * before anything is claimed), `StoreUnavailableError`, `LeaseLostError`, `ReplayedError` (a stored
   * error outcome), `OutcomeEncodingError` (`fn` ran but the codec could not encode its result: stored as
   * final, so retries get it replayed and `fn` never runs again) or `fn`'s own error (after the claim was
   * released, or stored as final).
   */
  run<T>(request: RunRequest, fn: (context: RunContext) => Promise<T> | T): Promise<RunOutcome<T>>;
  /**
   * The storage key that `run` would use for (scope, key). For a request that ran through an HTTP adapter
   * (or a transactional route), pass `{ http: true }`: a scope it got that starts `consumer:`,
   * `handed-back:` or `dead-letter:` is keyed apart from those components' records.
   */
  storageKeyFor(key: string, scope?: string, options?: StorageKeyOptions): string;
  /**
   * What the next `run` with (scope, key) would meet, and the record behind it: an admin call (one store
   * read) for questions such as "why does this key answer 422?". With only a storage key (from a trace's
   * `idempotency.key_hash` or a log), call {@link inspectKey} on the store.
   * `options` as for {@link Idempotency.storageKeyFor}.
   * @throws InvalidKeyError for a key `run` would refuse.
   * @throws InvalidOptionsError for `options` that are not {@link StorageKeyOptions}.
   * @throws StoreUnavailableError when the store cannot be read.
   */
  inspect(key: string, scope?: string, options?: StorageKeyOptions): Promise<KeyInspection>;
}

// Completion is retried on store errors for as long as the lease lasts: the side effect already happened,
// and a lost completion means a retry waits out the lease and then runs it again, so an outage shorter
// than what is left of the lease must cost a wait, never a second execution. The pause grows by 50 ms an
// attempt up to 1 s; at least three attempts however little is left.
const COMPLETE_MIN_ATTEMPTS = 3;
const COMPLETE_BACKOFF_MS = 50;
const COMPLETE_BACKOFF_MAX_MS = 1000;

function shouldStoreError(policy: StoreErrorsPolicy, error: unknown): boolean {
  if (typeof policy !== 'function') return policy;
  // A predicate that throws (it read a property the error lacks) must not leave the claim held until its
  // lease runs out, nor be reported as a failed release: it releases, the default.
  try {
    return Boolean(policy(error));
  } catch {
    return false;
  }
}

/**
 * The outcome to keep as the key's final one after `fn` threw `error`, or `undefined` to release the claim:
 * a step's recorded failure that `fn` rethrew, as recorded; `fn`'s error when the policy stores it, or it
 * is an OutcomeEncodingError (a step's result that could not be encoded: the step's effect happened); else
 * the failure a step of this execution recorded, if one did (see settleFailure).
 */
function finalFailure(
  error: unknown,
  lease: LeaseKeeper,
  storeErrors: StoreErrorsPolicy,
): Uint8Array | undefined {
  const recorded = lease.stepFailureOf(error);
  if (recorded !== undefined) return recorded;
  if (error instanceof OutcomeEncodingError || shouldStoreError(storeErrors, error)) {
    return encodeErrorOutcome(error);
  }
  return lease.firstStepFailure;
}

function asStoreError(store: Store, operation: string, error: unknown): StoreUnavailableError {
  // The brand guard, not instanceof: the error may come from another copy of this package.
  if (isStoreUnavailableError(error)) return error;
  return new StoreUnavailableError(`Store '${store.name}' failed during ${operation}`, {
    cause: error,
  });
}

/** The cache's fields; another (`maxSize`, `max`) would be ignored in silence. */
const CACHE_FIELDS = ['maxEntries', 'maxBytes'] as const;

/** `cache.<name>`: a positive integer, or `fallback` when absent. */
function cacheBound(value: number | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  // NaN or a fraction would size the cache's generations as nonsense, silently.
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new InvalidOptionsError(
      `cache.${name} must be a positive integer, got ${shownValue(value)}`,
    );
  }
  return value;
}

/** The completed-records cache the `cache` option asks for, or `undefined` for `false`. */
function completedCache(option: unknown): CompletedCache | undefined {
  const settings = switchOption<{ maxEntries?: number; maxBytes?: number }>(option, 'cache') ?? {};
  if (settings === false) return undefined;
  knownFields(settings, 'cache', CACHE_FIELDS);
  return new CompletedCache(
    cacheBound(settings.maxEntries, 'maxEntries', 1000),
    cacheBound(settings.maxBytes, 'maxBytes', DEFAULT_CACHE_MAX_BYTES),
  );
}

// Not unref'd: a completion still being retried is pending I/O like any other, and a script awaiting its
// run must not exit before it settles. A shutdown ends it by closing the store's client
// (`isClosedClientError`).
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// `encodeValueOutcome(defaultCodec.encode(undefined))` in one allocation instead of two: handlers that
// return nothing (every consumer handler) are the common case.
const UNDEFINED_OUTCOME = encodeValueOutcome(defaultCodec.encode(undefined));
const encodeUndefined = () => UNDEFINED_OUTCOME.slice();

/**
 * Create an idempotency engine.
 * @example
 * const idempotency = createIdempotency({ store: memoryStore(), leaseMs: '30s', retentionMs: '24h' });
 * const outcome = await idempotency.run({ key, payload: body }, async (ctx) => charge(body, ctx.downstreamKey('charge')));
 * switch (outcome.status) { case 'executed': case 'replayed': return outcome.value; … }
 */
export function createIdempotency(options: IdempotencyOptions): Idempotency {
  if (options.store === undefined || options.store === null) {
    throw new InvalidOptionsError('store is required');
  }
  // A misspelt option (`leasMs`) would be ignored, the default running instead of what was asked.
  knownFields(options, 'createIdempotency', ENGINE_OPTION_NAMES);
  const batch = switchOption<BatchingOptions>(options.batch, 'batch');
  const store =
    batch === false
      ? options.store
      : withBatching(options.store, {
          maxInFlight: options.store.capabilities.batchMaxInFlight,
          maxInFlightWhenBusy: options.store.capabilities.batchMaxInFlightWhenBusy,
          window: options.store.capabilities.batchWindow,
          windowWhenBusy: options.store.capabilities.batchWindowWhenBusy,
          ...batch,
        });
  const namespace = stringOption(options.namespace, 'namespace', 'default');
  const engineFailOpen = booleanOption(options.failOpen, 'failOpen');
  const engineStoreErrors = storeErrorsOption<StoreErrorsPolicy>(
    options.storeErrors,
    'storeErrors',
    false,
  );
  const engineCodec = codecOption(options.codec, 'codec', defaultCodec);
  const defaultLeaseMs = toMs(options.leaseMs ?? '30s', 'leaseMs');
  const defaultRetentionMs = toMs(options.retentionMs ?? '24h', 'retentionMs');
  const maxExecutionMs =
    options.maxExecution === undefined ? undefined : toMs(options.maxExecution, 'maxExecution');
  const hooks = callbacksOption<IdempotencyHooks>(options.hooks, 'hooks') ?? {};
  const clock = options.clock ?? systemClock;
  const leases: LeaseEnvironment = {
    store,
    clock,
    leaseClock: clock === systemClock ? monotonicClock : clock,
    hooks,
    namespace,
    heartbeats: booleanOption(options.extendLease, 'extendLease', true)
      ? new Heartbeats()
      : undefined,
    maxExecutionMs,
  };
  const cache = completedCache(options.cache);

  /**
   * The engine's runs, reporting to `hooks` (`leases` carries the same hooks to the lease keepers; both
   * shadow the engine's own inside). Two sets share this engine's store, batcher, cache, clock and
   * heartbeats: the application's runs with its hooks, and the library's own records (unreported-runs.ts)
   * with only the store's hooks.
   */
  function runner(hooks: IdempotencyHooks, leases: LeaseEnvironment) {
    function settleExisting<T>(
      record: IdempotencyRecord,
      fingerprint: string,
      codec: OutcomeCodec,
      event: HookEvent,
      fromCache: boolean,
      leaseMs: number,
    ): RunOutcome<T> {
      // Completed records never change before they expire, so any of them may serve later replays.
      if (!fromCache && record.status === RecordStatus.Completed)
        cache?.set(event.storageKey, record);
      return settleRecord<T>(record, {
        fingerprint,
        codec,
        now: clock.now(),
        hooks,
        event,
        fromCache,
        leaseMs,
      });
    }

    async function complete(
      lease: LeaseKeeper,
      outcome: Uint8Array,
      retentionMs: number,
      event: HookEvent,
    ): Promise<boolean> {
      try {
        return checkedCompletion(
          await store.complete(lease.storageKey, lease.token, outcome, retentionMs),
        );
      } catch (error) {
        return completeAgain(lease, outcome, retentionMs, event, error);
      }
    }

    // A completion answered with anything but a boolean is retried as a failed one: the handler ran, and a
    // completion sent again with the same token is safe (it reports success if the first was applied).
    function checkedCompletion(completed: boolean): boolean {
      if (typeof completed !== 'boolean')
        throw malformedAnswerError(store.name, 'complete', completed);
      return completed;
    }

    // The first completion failed: retry while the lease lasts (kept apart so that the common path, one
    // successful call, stays small). Past the lease the store refuses the completion anyway.
    async function completeAgain(
      lease: LeaseKeeper,
      outcome: Uint8Array,
      retentionMs: number,
      event: HookEvent,
      firstError: unknown,
    ): Promise<boolean> {
      const { storageKey, token } = lease;
      // What is left of the lease, on the real clock too, so that an injected clock that stands still
      // cannot make this retry forever.
      const remainingMs = lease.remainingMs();
      const end = clock.now() + remainingMs;
      const realEnd = performance.now() + remainingMs;
      let error = firstError;
      for (let attempt = 1; ; attempt++) {
        // Applied but short of its replicas: an answer, not a failure, so nothing to send again (a retry
        // could not confirm it sooner, and would hold the connection for another wait).
        if (isReplicationShortError(error)) return checkedCompletion(lease.replicationShort(error));
        emit(hooks, 'onStoreError', { ...event, operation: 'complete', error });
        const pause = Math.min(COMPLETE_BACKOFF_MS * attempt, COMPLETE_BACKOFF_MAX_MS);
        const leaseOver = clock.now() + pause >= end || performance.now() + pause >= realEnd;
        // A client the application closed (a shutdown) will not come back: no point waiting out the lease.
        const hopeless = leaseOver || isClosedClientError(error);
        if (attempt >= COMPLETE_MIN_ATTEMPTS && hopeless) {
          throw asStoreError(store, 'complete', error);
        }
        await sleep(pause);
        try {
          return checkedCompletion(await store.complete(storageKey, token, outcome, retentionMs));
        } catch (next) {
          error = next;
        }
      }
    }

    async function run<T>(
      request: RunRequest,
      fn: (context: RunContext) => Promise<T> | T,
    ): Promise<RunOutcome<T>> {
      validateKey(request.key);
      const storageKey = runStorageKey(namespace, request);
      const fingerprint =
        request.fingerprint ??
        (request.payload === undefined ? '' : createFingerprint(request.payload));
      const leaseMs =
        request.leaseMs === undefined ? defaultLeaseMs : toMs(request.leaseMs, 'leaseMs');
      const retentionMs =
        request.retentionMs === undefined
          ? defaultRetentionMs
          : toMs(request.retentionMs, 'retentionMs');
      const codec = codecOption(request.codec, 'codec', engineCodec);
      const storeErrors = storeErrorsOption(request.storeErrors, 'storeErrors', engineStoreErrors);
      // Checked here, before the claim, not where it is read: an outage is the wrong time to learn of it.
      const failOpen = booleanOption(request.failOpen, 'failOpen', engineFailOpen);
      const event: HookEvent = { namespace, storageKey };

      const cached = cache?.get(storageKey, clock.now());
      if (cached !== undefined) {
        return settleExisting(cached, fingerprint, codec, event, true, leaseMs);
      }

      let claim: Awaited<ReturnType<Store['claim']>>;
      let claimedFrom: number;
      try {
        // The key stays reserved for this request as long as its outcome would be kept: should this attempt
        // crash, a different request under the same key is a mismatch, not a takeover (guarantee 3).
        // The lease is counted from here, before the call (see LeaseKeeper's `heldUntil`).
        claimedFrom = leases.leaseClock.now();
        claim = await store.claim(storageKey, { fingerprint, leaseMs, reserveMs: retentionMs });
      } catch (error) {
        emit(hooks, 'onStoreError', { ...event, operation: 'claim', error });
        const unavailable = asStoreError(store, 'claim', error);
        if (!failOpen) throw unavailable;
        emit(hooks, 'onFailOpen', { ...event, error: unavailable });
        return runUnprotected(fn, storageKey);
      }
      // Checked, never trusted (see store-answers.ts): an answer the engine cannot read fails this call alone,
      // closed even under failOpen, since the store did answer and the key may be held.
      if (!isClaimResult(claim)) {
        const error = malformedAnswerError(store.name, 'claim', claim);
        emit(hooks, 'onStoreError', { ...event, operation: 'claim', error });
        throw error;
      }
      if (!claim.claimed) {
        return settleExisting(claim.record, fingerprint, codec, event, false, leaseMs);
      }

      const { token, attempt } = claim;
      if (attempt > 1) emit(hooks, 'onTakeover', { ...event, token, attempt });
      const lease = new LeaseKeeper(leases, storageKey, token, leaseMs, claimedFrom);
      const context = new ExecutionContext(lease, token, attempt, storageKey, leaseMs);

      const startedAt = clock.now();
      lease.start();
      let value: T;
      try {
        value = await fn(context);
      } catch (error) {
        lease.stop();
        // How long `fn` ran, read before the release or completion below: those are the store's time (a
        // slow or failing store stretches them up to the lease), not the handler's.
        const durationMs = clock.now() - startedAt;
        // A claim its caller gave up waiting for (abandoned-claim.ts): `fn` did nothing. Released, never
        // stored whatever `storeErrors`, and reported as the slow claim it was, not as a failed execution.
        // A takeover is left to its lease instead: its release would delete the steps the crashed attempt
        // recorded (a charge made, run again by the next attempt) and end its reservation, as the Redis
        // store's refused claims leave one (redis-store.ts, releaseRefused).
        //
        // A claim on which a step's store call failed in this execution (`loadSteps` at a takeover's first
        // step, `saveStep` after a step ran) is left to its lease too, whatever `fn` then threw (the step's
        // StoreUnavailableError, an error of its own, an HTTP adapter's 5xx) and whatever `storeErrors`: the
        // store may hold steps this execution could not load, or a result whose recording it could not
        // confirm (a timeout after the write), and a release deletes them with the reservation, so the next
        // retry would run the charge again. Nor is the error stored as final: the failure was the store's,
        // not the request's, and a blip would become the key's answer for good. Left to its lease, the
        // record keeps its steps, and the retry after the lease takes it over and replays them. A handler
        // that catches the error and returns still completes; a step's OutcomeEncodingError (or its replay
        // on a takeover) is still stored as final (as `fn`'s own unencodable result is, settleUnencodable):
        // a completed record runs nothing again either.
        const abandoned = isAbandonedClaimError(error);
        const leftToLease =
          (abandoned && attempt > 1) ||
          (lease.stepStoreFailed &&
            !(error instanceof OutcomeEncodingError) &&
            lease.stepFailureOf(error) === undefined);
        const stored = leftToLease
          ? false
          : await settleFailure(error, lease, retentionMs, abandoned ? false : storeErrors, event);
        if (abandoned) emit(hooks, 'onStoreError', { ...event, operation: 'claim', error });
        else emit(hooks, 'onFailed', { ...event, token, attempt, durationMs, stored });
        throw error;
      }
      lease.stop();
      // As above: `fn`'s own time, not the completion's that follows.
      const durationMs = clock.now() - startedAt;

      let outcome: Uint8Array;
      try {
        outcome =
          value === undefined && codec === defaultCodec
            ? encodeUndefined()
            : encodeValueOutcome(codec.encode(value));
      } catch (cause) {
        throw await settleUnencodable(cause, lease, retentionMs, event, attempt, durationMs);
      }
      // The first completion inline (one async frame less per run); `completeAgain` retries a failure.
      let completed: boolean;
      try {
        completed = checkedCompletion(
          await store.complete(storageKey, token, outcome, retentionMs),
        );
      } catch (error) {
        completed = await completeAgain(lease, outcome, retentionMs, event, error);
      }
      if (!completed) {
        // Reported once per execution: the heartbeat may have found the loss already.
        if (!lease.lossReported) emit(hooks, 'onLeaseLost', { ...event, token });
        throw new LeaseLostError(token);
      }
      const now = clock.now();
      cache?.set(storageKey, {
        status: RecordStatus.Completed,
        fingerprint,
        token,
        outcome,
        completedAt: now,
        expiresAt: now + retentionMs,
      });
      if (hooks.onExecuted !== undefined) {
        emit(hooks, 'onExecuted', { ...event, token, attempt, durationMs });
      }
      return { status: 'executed', value, token, attempt, failedOpen: false };
    }

    // After `fn` threw: store the error as final, or release the claim so a retry runs again. Either way the
    // caller gets `fn`'s own error; a store failure here only means the claim expires on its own. Resolves
    // to true when the error is now the key's stored outcome.
    //
    // A step whose recorded outcome is a failure (its result could not be encoded: the step's effect
    // happened) makes the failure final whatever the policy and whatever `fn` then threw (the step's error,
    // an error of its own, an HTTP adapter's 5xx): a release would delete the recorded step, and the next
    // retry would run its effect again. A takeover's replay of such a step (a ReplayedError) is stored as
    // the outcome recorded for the step, so every later retry gets what the first attempt's did
    // (`original.code` 'outcome_not_encodable'), not a replay of a replay.
    async function settleFailure(
      error: unknown,
      lease: LeaseKeeper,
      retentionMs: number,
      storeErrors: StoreErrorsPolicy,
      event: HookEvent,
    ): Promise<boolean> {
      const { storageKey, token } = lease;
      let keepError = false;
      try {
        const outcome = finalFailure(error, lease, storeErrors);
        keepError = outcome !== undefined;
        if (outcome !== undefined) {
          const stored = await complete(lease, outcome, retentionMs, event);
          if (!stored && !lease.lossReported) emit(hooks, 'onLeaseLost', { ...event, token });
          return stored;
        }
        await store.release(storageKey, token);
      } catch (storeError) {
        // `complete` has reported each of its own failures already. A release applied but short of its
        // replicas is reported as such: a failover that loses it only keeps the key until the lease ends.
        if (!keepError) {
          if (isReplicationShortError(storeError)) lease.replicationShort(storeError);
          else emit(hooks, 'onStoreError', { ...event, operation: 'release', error: storeError });
        }
      }
      return false;
    }

    // `fn` ran but its result cannot be encoded: its effect happened, so a retry must not run it again.
    // The failure becomes the key's final outcome (replayed as a `ReplayedError`), as a stored error would;
    // should that completion fail too, the claim is left to expire, as `settleFailure` leaves it.
    async function settleUnencodable(
      cause: unknown,
      lease: LeaseKeeper,
      retentionMs: number,
      event: HookEvent,
      attempt: number,
      durationMs: number,
    ): Promise<OutcomeEncodingError> {
      const error = new OutcomeEncodingError(cause);
      const { token } = lease;
      let stored = false;
      try {
        stored = await complete(lease, encodeErrorOutcome(error), retentionMs, event);
        if (!stored && !lease.lossReported) emit(hooks, 'onLeaseLost', { ...event, token });
      } catch {
        // `complete` has reported each of its failures; the claim expires on its own.
      }
      emit(hooks, 'onFailed', { ...event, token, attempt, durationMs, stored });
      return error;
    }

    async function runUnprotected<T>(
      fn: (context: RunContext) => Promise<T> | T,
      storageKey: string,
    ): Promise<RunOutcome<T>> {
      const value = await fn({
        signal: new AbortController().signal,
        token: 0,
        attempt: 1,
        storageKey,
        extendLease: async () => {},
        downstreamKey: (step) => deriveDownstreamKey(storageKey, step),
        // Failing open records nothing: a step simply runs (under the same rules).
        step: unrecordedSteps(storageKey),
      });
      return { status: 'executed', value, token: 0, attempt: 1, failedOpen: true };
    }

    return run;
  }

  const reportedRun = runner(hooks, leases);
  // Made at the first such run (most engines, an HTTP layer's, never make one), from what was read above
  // at creation: the same namespace, store and options as every other run of this engine.
  let unreportedRun: typeof reportedRun | undefined;

  function run<T>(
    request: RunRequest,
    fn: (context: RunContext) => Promise<T> | T,
  ): Promise<RunOutcome<T>> {
    if (!isUnreportedRun(request)) return reportedRun(request, fn);
    if (unreportedRun === undefined) {
      const storeHooks = storeHooksOf(hooks);
      unreportedRun = runner(storeHooks, { ...leases, hooks: storeHooks });
    }
    return unreportedRun(request, fn);
  }

  return {
    store: options.store,
    namespace,
    run,
    storageKeyFor: (key, scope = '', keyOptions) =>
      lookupKey(namespace, key, scope, keyOptions, 'storageKeyFor'),
    inspect: async (key, scope = '', keyOptions) =>
      inspectKey(options.store, lookupKey(namespace, key, scope, keyOptions, 'inspect'), () =>
        clock.now(),
      ),
  };
}
