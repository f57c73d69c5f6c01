/**
 * Observation points of the engine. Metrics, logs and traces sit on these; a hook that throws (or returns a
 * promise that rejects) is ignored so observability can never change an outcome.
 * @module
 */
import { isThenable } from './thenable.js';

/** What every hook receives. Only the hashed storage key is given, never the raw client key. */
export interface HookEvent {
  /** The engine's namespace. */
  namespace: string;
  /** The storage key (SHA-256 hex of namespace, scope and key). */
  storageKey: string;
}

/**
 * How a run ended, as the hooks see it: one name per outcome hook, shared by the metrics and tracing
 * modules (the `outcome` label and the `idempotency.outcome` span attribute).
 */
export const RunOutcomeName = {
  /** `fn` ran and its outcome was stored (`onExecuted`). */
  Executed: 'executed',
  /** A stored outcome was replayed (`onReplayed`; HTTP `Idempotent-Replayed: true`). */
  Replayed: 'replayed',
  /** Another attempt held the key (`onConflict`; HTTP 409, consumers redeliver later). */
  InProgress: 'in_progress',
  /** The key was reused with a different fingerprint (`onMismatch`; HTTP 422). */
  Mismatch: 'mismatch',
  /** `fn` threw: the claim was released, or the error stored as the key's outcome (`onFailed`). */
  Failed: 'failed',
  /** The store failed and `fn` ran unprotected because `failOpen` was set (`onFailOpen`). */
  FailOpen: 'fail_open',
} as const;
/** One of {@link RunOutcomeName}'s values. */
export type RunOutcomeName = (typeof RunOutcomeName)[keyof typeof RunOutcomeName];

/** Callbacks for each engine event; all optional. */
export interface IdempotencyHooks {
  /**
   * `fn` ran and its outcome was stored. `durationMs` is how long `fn` ran, not the completion after it
   * (as in `onFailed`: not the release or the stored error's completion).
   */
  onExecuted?(event: HookEvent & { token: number; attempt: number; durationMs: number }): void;
  /** A stored outcome was replayed. `fromCache` is true when no store round trip was needed. */
  onReplayed?(event: HookEvent & { fromCache: boolean }): void;
  /**
   * `fn` threw (or, in a transactional mode, its transaction rolled back with its error). `stored` is true
   * when the error was kept as the key's final outcome (`storeErrors`), false when the claim was released
   * (or rolled back) so a retry runs again, or left to its lease because a step's store call failed in
   * this execution (a retry takes it over once the lease ends and replays the recorded steps).
   */
  onFailed?(
    event: HookEvent & { token: number; attempt: number; durationMs: number; stored: boolean },
  ): void;
  /** Another attempt holds the key (`in_progress`). */
  onConflict?(event: HookEvent & { retryAfterMs: number }): void;
  /** The key was reused with a different fingerprint. */
  onMismatch?(event: HookEvent): void;
  /** An expired claim was taken over (`attempt` > 1). */
  onTakeover?(event: HookEvent & { token: number; attempt: number }): void;
  /**
   * This execution lost its lease (found by the heartbeat, or by a fenced-out completion), or gave it up
   * past `maxExecution`: another attempt may now run the key, and this one's completion is fenced out if
   * one did. Reported once per execution.
   */
  onLeaseLost?(event: HookEvent & { token: number }): void;
  /** A store call failed. `operation` names the store method. */
  onStoreError?(event: HookEvent & { operation: string; error: unknown }): void;
  /** The store failed and the call ran unprotected because `failOpen` was set. */
  onFailOpen?(event: HookEvent & { error: unknown }): void;
  /**
   * A step's function ran and its result was recorded on the claim (`ctx.step`). `durationMs` is the
   * function's time, not the recording's. Not reported for a step whose function threw, nor when failing
   * open (nothing is recorded then).
   */
  onStepRecorded?(event: StepHookEvent & { durationMs: number }): void;
  /**
   * A step's result recorded by a crashed attempt was returned instead of running its function again: the
   * crash was resumed from this step on. A count of these is how often recovery points save a repeat.
   */
  onStepReplayed?(event: StepHookEvent): void;
  /**
   * A write made after `fn` ran (its completion, a stored error, a release, a step's result) was applied,
   * but fewer replicas than the store waits for confirmed it in time (the Redis store's
   * `waitForReplicas`). The run's answer is unchanged: the write is on the primary. Until the replicas
   * have it, a failover can lose it, and a lost completion (or step) means a retry runs `fn` (or the step)
   * again: watch for these, and after a failover inspect the keys they name.
   */
  onReplicationShort?(event: ReplicationShortHookEvent): void;
}

/** What `onReplicationShort` receives: the run's identity, the unconfirmed write and the replicas' count. */
export interface ReplicationShortHookEvent extends HookEvent {
  /** The execution's fencing token. */
  token: number;
  /** The store operation whose write is unconfirmed: `complete`, `release` or `saveStep`. */
  operation: string;
  /** Replicas that confirmed the write in time; `-1` when the confirmation itself failed. */
  acknowledged: number;
  /** Replicas the store waits for (`waitForReplicas.count`). */
  required: number;
}

/** What the step hooks receive: the run's identity, and which step. */
export interface StepHookEvent extends HookEvent {
  /** The execution's fencing token. */
  token: number;
  /** The execution's attempt (a replayed step is always on an attempt above 1). */
  attempt: number;
  /** The step's name, as given to `ctx.step` (`[A-Za-z0-9._:-]{1,100}`). */
  step: string;
}

const ignore = () => {};

/**
 * Call one observer with `event`, swallowing what it throws and, for an async hook, what its promise
 * rejects with: hooks are typed to return nothing, but an `async` one type-checks, and its rejection would
 * otherwise be unhandled and end the process. For code that calls user callbacks outside the engine
 * (consumers, adapters) so that each isolates them alike.
 */
export function callHook<E>(hook: (event: E) => unknown, event: E): void {
  try {
    ignoreRejection(hook(event));
  } catch {
    // Observability must never change an outcome.
  }
}

/**
 * Swallow the rejection of what a callback returned, when it is a promise (an `async` hook or callback):
 * for callers that isolate a callback's synchronous throw themselves.
 */
export function ignoreRejection(result: unknown): void {
  if (isThenable(result)) Promise.resolve(result).catch(ignore);
}

/** Call a hook, swallowing anything it throws or rejects with. */
export function emit<K extends keyof IdempotencyHooks>(
  hooks: IdempotencyHooks,
  name: K,
  event: Parameters<NonNullable<IdempotencyHooks[K]>>[0],
): void {
  const hook = hooks[name] as ((e: typeof event) => unknown) | undefined;
  if (hook !== undefined) callHook(hook, event);
}

/**
 * `T`, but not a place to infer `T` from: TypeScript 5.4's `NoInfer`, written so that the published types
 * also compile on TypeScript 5.0–5.3 (an indexed access on a deferred conditional is not inferred through).
 */
type NotInferred<T> = [T][T extends unknown ? 0 : never];

/**
 * One set of hooks that calls each of `list` in turn, so metrics, traces and your own logging can all
 * observe one engine (or one consumer: it combines consumer hooks alike). Each hook is isolated: one that
 * throws (or rejects) neither stops the others nor changes an outcome. Only the hooks some member defines are set, so
 * an unobserved event stays free.
 *
 * The hook type `H` comes from where the result goes (the `hooks` option of an engine, an HTTP adapter or a
 * consumer, so a consumer's events carry its broker's message type), else it is `IdempotencyHooks`; it is
 * never inferred from the members. Each member is checked against it, so a plain object beside
 * `prometheusHooks()` is typed by the hooks it may define (a misspelt hook is an error) rather than refused
 * for lacking the `metrics` of the first member. Give it when nothing else does, for consumer hooks kept in
 * a variable first: `combineHooks<ConsumerHooks<AmqpMessage>>(…)`.
 * @example
 * import { combineHooks, createIdempotency } from 'idempotency-kit';
 * import { prometheusHooks } from 'idempotency-kit/prometheus';
 * import { openTelemetryHooks } from 'idempotency-kit/opentelemetry';
 *
 * const idempotency = createIdempotency({
 *   store,
 *   hooks: combineHooks(prometheusHooks(), openTelemetryHooks(), { onLeaseLost: (e) => log.warn(e) }),
 * });
 */
export function combineHooks<H = IdempotencyHooks>(
  // Not inferred: inferred from the members, `H` was the first one's own type (`PrometheusHooks`, with its
  // `metrics`), which refused a plain hooks object beside it. `H` is unconstrained so that the contextual
  // type of an optional `hooks` option (`IdempotencyHooks | undefined`) is taken as it is: failing an
  // `object` constraint, it would fall back to `object` and type the members' parameters as `any`.
  ...list: (NotInferred<H> | undefined)[]
): NonNullable<H> {
  const members = new Map<string, Array<(event: unknown) => void>>();
  for (const hooks of list) {
    if (hooks === undefined) continue;
    for (const [name, hook] of Object.entries(hooks as object)) {
      // Only the `on…` callbacks: hook sets may carry other members (prometheusHooks' `metrics`).
      if (typeof hook !== 'function' || !name.startsWith('on')) continue;
      const bound = (hook as (event: unknown) => void).bind(hooks);
      const existing = members.get(name);
      if (existing === undefined) members.set(name, [bound]);
      else existing.push(bound);
    }
  }
  const combined: Record<string, (event: unknown) => void> = {};
  for (const [name, hooks] of members) {
    combined[name] = (event: unknown) => {
      // Each isolated: one that throws or rejects neither changes an outcome nor silences the others.
      for (const hook of hooks) callHook(hook, event);
    };
  }
  return combined as NonNullable<H>;
}
