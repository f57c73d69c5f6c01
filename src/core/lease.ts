/**
 * Keeps a claim's lease alive while the handler runs (a heartbeat about every third of the lease) and
 * aborts the handler's `AbortSignal` the moment the lease is known to be lost, or once the execution has
 * outlived the engine's `maxExecution` (its lease is then no longer extended).
 * @module
 */
import { AsyncResource } from 'node:async_hooks';
import type { Store } from '../store/store.js';
import type { Clock } from './clock.js';
import { MAX_TIMER_MS } from './duration.js';
import { LeaseLostError, type ReplicationShortError, StoreUnavailableError } from './errors.js';
import type { Beating, Heartbeats } from './heartbeat.js';
import { emit, type HookEvent, type IdempotencyHooks } from './hooks.js';
import { malformedAnswerError } from './store-answers.js';

/** What every lease of one engine shares. */
export interface LeaseEnvironment {
  store: Store;
  clock: Clock;
  /**
   * What a lease's remaining time is measured on (see `heldUntil`): a monotonic clock with the system
   * clock, the engine's injected clock otherwise (tests drive it).
   */
  leaseClock: Clock;
  hooks: IdempotencyHooks;
  namespace: string;
  /** The engine's heartbeat timers; `undefined` when leases are not extended automatically. */
  heartbeats: Heartbeats | undefined;
  /** How long an execution may keep its claim alive; `undefined` for no bound. */
  maxExecutionMs: number | undefined;
}

/** The lease of one claim, from claim to completion or release. */
export class LeaseKeeper implements Beating {
  // Created on first use: most handlers never look at their signal, and an AbortController per run is a
  // measurable share of the engine's overhead.
  private controller: AbortController | undefined;
  private started = false;
  private stopped = false;
  /** When the lease stops being extended (`maxExecution` after the start), if bounded. */
  private deadline = Number.POSITIVE_INFINITY;
  /**
   * The run's async context, captured at start when a lease event may be reported from a heartbeat: the
   * engine's shared timer runs in the context of whichever run armed it, and a hook reading the active
   * span or a request-scoped logger must see this run's.
   */
  private runScope: AsyncResource | undefined;

  constructor(
    private readonly env: LeaseEnvironment,
    /** The key this lease is on. */
    readonly storageKey: string,
    /** The execution's fencing token. */
    readonly token: number,
    private readonly leaseMs: number,
    /**
     * When the claim was asked for, on `env.leaseClock`: the store counted the lease from a moment after
     * it (see `heldUntil`).
     */
    claimedFrom: number,
  ) {
    this.heldUntil = claimedFrom + leaseMs;
  }

  /**
   * When the lease runs out by this process's own clock: `leaseMs` after the claim (or the last extension)
   * was *asked for*. Not after its reply came back: the store started the lease when it ran the call,
   * somewhere between the two, and a reply that waited (a batch's queue, a slow link, a Redis `WAIT` for
   * replicas, up to the store's own timeout) made this process count on a lease the store had already
   * ended, so a step could start its effect beside a takeover. Counting from the ask is never later than
   * the store's end (clock rates aside). Not the record's `leaseUntil`, which is on the store's clock: a skew
   * between the two clocks would make a healthy lease look expired (and one failed extension abort it).
   * On `env.leaseClock`, monotonic in production: the wall clock stepped forward (an NTP step, a VM
   * resumed) made a healthy lease look lost at the next step, and stepped back, hid a lost one.
   */
  private heldUntil: number;

  /**
   * The furthest end the handler asked for with `ctx.extendLease(ms)`, on `env.leaseClock` (-Infinity until
   * it asks). A heartbeat extends to at least this end: extending by the claim's lease, it undid
   * `extendLease('10m')` a third of a lease later, and a handler that then blocked the event loop past that
   * shorter end was taken over while it still ran. Raised when the request is sent (a beat started while
   * it is in flight must not end the lease sooner) and again when its reply comes back (the store counted
   * from then at the latest).
   */
  private requestedUntil = Number.NEGATIVE_INFINITY;

  /**
   * The last extension asked for (a heartbeat's or the handler's), settled or not; `undefined` until the
   * first. Each waits for the one before it (see {@link serially}): a store with several connections (a
   * PostgreSQL pool) may run two extensions in flight in either order, so a beat sent earlier with a
   * shorter lease could cut back the end the handler asked for, and the reply that comes last, not the
   * call that ran last, would set `heldUntil`.
   */
  private lastExtension: Promise<unknown> | undefined;

  /**
   * Armed when a heartbeat starts, cleared when one extends the lease: fires at `heldUntil` and aborts the
   * signal if the lease has run out by then. A beat finds the loss only when its own extension fails, and
   * the next beat comes up to half a period after the lease's end, or never while an extension hangs (a
   * stalled link, up to the pool's `query_timeout` or the store's `timeoutMs`): the handler ran on past its
   * lease, its signal not aborted, while a retry took the key over and ran beside it (measured on
   * PostgreSQL: lease 6 s, `query_timeout` 2 s, the takeover ran at 6.06 s and the signal aborted at 8.06 s).
   */
  private expiry: NodeJS.Timeout | undefined;

  /**
   * The `StoreUnavailableError`s the step runner threw because a step's store call (`loadSteps`,
   * `saveStep`) failed in this execution, `undefined` until one did: the engine then leaves the claim to
   * its lease whatever the handler does next, instead of releasing it (see
   * {@link LeaseKeeper.stepStoreFailed}), and a consumer tells them apart by identity from a handler's own.
   */
  private stepStoreErrors: unknown[] | undefined;

  /**
   * The failures recorded as steps' outcomes, in order (a result the step's codec could not encode, or
   * its replay on a takeover): the error the step threw, and the outcome recorded for it. `undefined`
   * until one. See {@link LeaseKeeper.stepFailed}.
   */
  private stepFailures: Array<{ thrown: unknown; outcome: Uint8Array }> | undefined;

  /**
   * True once a step's store call failed in this execution ({@link LeaseKeeper.stepStoreFailure}): the
   * claim may hold steps this execution cannot see or confirm, which a release would delete.
   */
  get stepStoreFailed(): boolean {
    return this.stepStoreErrors !== undefined;
  }

  /**
   * A step's store call (`loadSteps` or `saveStep`) failed: report it, and mark the claim as one the engine
   * must not release (a release deletes the steps recorded on it, a crashed attempt's charge among them).
   * @param operation the store method that failed
   * @param error what the store threw
   * @param thrown the error the step runner throws for it, remembered for {@link LeaseKeeper.threwForStepStore}
   * @returns `thrown`
   */
  stepStoreFailure(
    operation: 'loadSteps' | 'saveStep',
    error: unknown,
    thrown: StoreUnavailableError,
  ): StoreUnavailableError {
    this.stepStoreErrors ??= [];
    this.stepStoreErrors.push(thrown);
    this.reportStoreError(operation, error);
    return thrown;
  }

  /**
   * Whether `error` is, by identity, an error the step runner threw in this execution because a step's
   * store call failed: the store is down, not the handler at fault (a consumer redelivers it later instead
   * of counting a handler failure). A handler's own `StoreUnavailableError` is not.
   */
  threwForStepStore(error: unknown): boolean {
    return this.stepStoreErrors?.includes(error) === true;
  }

  /**
   * A step ran, its effect happened, and its recorded outcome is a failure (its result could not be
   * encoded), thrown now by the step on its first run or replayed on a takeover: the claim must not be
   * released (a release deletes the recorded step, and the next retry runs its effect again). The engine
   * keeps a failure as the key's final outcome instead (see {@link LeaseKeeper.firstStepFailure}).
   * @param thrown the error the step throws
   * @param outcome the outcome recorded for the step (an error outcome)
   * @returns `thrown`
   */
  stepFailed<E>(thrown: E, outcome: Uint8Array): E {
    this.stepFailures ??= [];
    this.stepFailures.push({ thrown, outcome });
    return thrown;
  }

  /**
   * The outcome recorded for the step whose failure `error` is, by identity ({@link LeaseKeeper.stepFailed}):
   * kept as final when `fn` rethrows it, so that a takeover that rethrows its `ReplayedError` stores what
   * the first attempt would have (the `OutcomeEncodingError`), not a description of the replay.
   * `undefined` when `error` is no step's recorded failure.
   */
  stepFailureOf(error: unknown): Uint8Array | undefined {
    return this.stepFailures?.find((failure) => failure.thrown === error)?.outcome;
  }

  /**
   * The outcome recorded for the first step of this execution whose recorded outcome is a failure
   * ({@link LeaseKeeper.stepFailed}), `undefined` when none: the key's final outcome when `fn` then throws
   * an error of its own that is not to be stored, since a release would run that step's effect again.
   */
  get firstStepFailure(): Uint8Array | undefined {
    return this.stepFailures?.[0]?.outcome;
  }

  /** How long the lease has left by this process's clock (see `heldUntil`), unless it is extended. */
  remainingMs(): number {
    return this.heldUntil - this.env.leaseClock.now();
  }

  /** The store the lease is held in. */
  get store(): Store {
    return this.env.store;
  }

  /**
   * The store fenced this execution out of an operation (a step's recording): the lease is lost. Reports
   * it once, aborts the signal, and returns the error to throw.
   */
  fencedOut(): LeaseLostError {
    this.lose();
    return this.signal.reason as LeaseLostError;
  }

  /** Report a failed store call made for this execution, in its async context. */
  reportStoreError(operation: string, error: unknown): void {
    this.report('onStoreError', {
      namespace: this.env.namespace,
      storageKey: this.storageKey,
      operation,
      error,
    });
  }

  /**
   * Report a write of this execution that the store applied but could not confirm on enough replicas
   * (`onReplicationShort`), in its async context. Returns the write's answer, which the caller goes on
   * with: the write is applied, and failing it could not undo what the handler did.
   */
  replicationShort(short: ReplicationShortError): boolean {
    this.report('onReplicationShort', {
      namespace: this.env.namespace,
      storageKey: this.storageKey,
      token: this.token,
      operation: short.operation,
      acknowledged: short.acknowledged,
      required: short.required,
    });
    return short.result;
  }

  /**
   * Report a step of this execution (`onStepRecorded` with the function's duration, or `onStepReplayed`).
   * @param attempt the execution's attempt, which the lease does not know
   */
  reportStep(step: string, attempt: number, durationMs?: number): void {
    const event = {
      namespace: this.env.namespace,
      storageKey: this.storageKey,
      token: this.token,
      attempt,
      step,
    };
    if (durationMs === undefined) this.report('onStepReplayed', event);
    else this.report('onStepRecorded', { ...event, durationMs });
  }

  /** Milliseconds on the engine's clock (what hook durations are measured in). */
  now(): number {
    return this.env.clock.now();
  }

  /** Aborts (with a {@link LeaseLostError} as reason) when the lease is lost. */
  get signal(): AbortSignal {
    this.controller ??= new AbortController();
    return this.controller.signal;
  }

  // Asked without creating the controller: only a handler that reads `signal` needs one.
  private get aborted(): boolean {
    return this.controller?.signal.aborted ?? false;
  }

  /**
   * True once the lease was found lost (or given up past `maxExecution`) and `onLeaseLost` reported it: a
   * fenced completion after that is the same loss, not a second one.
   */
  get lossReported(): boolean {
    return this.aborted;
  }

  // Heartbeat period: a third of the lease, at least 5 ms.
  private get periodMs(): number {
    return Math.max(Math.floor(this.leaseMs / 3), 5);
  }

  /** Start the heartbeat, if enabled, and the `maxExecution` clock, if bounded. */
  start(): void {
    const { maxExecutionMs } = this.env;
    // On the lease clock too (see `heldUntil`): a wall clock stepped back an hour kept a hung handler's
    // key an hour longer, and stepped forward, gave up on a healthy one early.
    if (maxExecutionMs !== undefined) this.deadline = this.env.leaseClock.now() + maxExecutionMs;
    if (this.env.heartbeats === undefined) return;
    const { hooks } = this.env;
    if (hooks.onLeaseLost !== undefined || hooks.onStoreError !== undefined) {
      this.runScope = new AsyncResource('idempotency-kit.lease');
    }
    this.started = true;
    this.env.heartbeats.add(this, this.periodMs);
  }

  /**
   * True once the run has ended (its handler returned or threw, {@link LeaseKeeper.stop}): the claim is
   * being completed or released by this execution, so nothing more can be recorded on it.
   */
  get ended(): boolean {
    return this.stopped;
  }

  /** Stop the heartbeat; results of an extension still in flight are ignored from now on. */
  stop(): void {
    this.stopped = true;
    this.unschedule();
    this.disarmExpiry();
  }

  /** Arm the {@link LeaseKeeper.expiry} timer for the lease's current end, unless it is armed. */
  private armExpiry(): void {
    if (this.expiry !== undefined) return;
    const remaining = Math.max(Math.ceil(this.heldUntil - this.env.leaseClock.now()), 0);
    this.expiry = setTimeout(this.expired, Math.min(remaining, MAX_TIMER_MS));
    // A run in flight keeps the process alive by itself; the lease's end must not.
    this.expiry.unref();
  }

  private disarmExpiry(): void {
    if (this.expiry === undefined) return;
    clearTimeout(this.expiry);
    this.expiry = undefined;
  }

  // Judged after the poll phase that follows (setImmediate), not in the timers phase that fired it: an event
  // loop that stalled past the end (a long synchronous task, a GC pause) runs its due timers before the I/O
  // that arrived meanwhile, so the extension's answer, already received, would be read only after the signal
  // had aborted a run whose lease the store had extended (measured on Redis: a 700 ms stall, the answer
  // `true` read 0.4 ms after the abort). Still held (the answer just read, the handler's extendLease, or a
  // timer that fired a fraction of a millisecond early), it is watched again until that end, whether a beat
  // is in flight or not: the next successful beat clears it, and after a failed one (no beat in flight, the
  // end not moved) nothing else would abort the run at its end.
  private readonly expired = (): void => {
    this.expiry = undefined;
    if (this.stopped || this.aborted) return;
    setImmediate(this.judgeExpiry);
  };

  private readonly judgeExpiry = (): void => {
    if (this.stopped || this.aborted) return;
    if (this.env.leaseClock.now() < this.heldUntil) {
      this.armExpiry();
      return;
    }
    this.lose();
    this.unschedule();
  };

  private unschedule(): void {
    if (!this.started) return;
    this.started = false;
    this.env.heartbeats?.remove(this, this.periodMs);
  }

  /**
   * The handler's `ctx.extendLease(leaseMs)`: the lease now ends `leaseMs` from now (default: the claim's
   * lease), even when that is sooner than its current end; later heartbeats keep it to at least the
   * furthest end asked for (see `requestedUntil`). Sent once an extension in flight is over (see `lastExtension`).
   * @throws LeaseLostError when the store fenced the extension out.
   * @throws StoreUnavailableError when the store could not be reached.
   */
  extend(leaseMs = this.leaseMs): Promise<void> {
    return this.serially(async () => {
      this.requestedUntil = Math.max(this.requestedUntil, this.env.leaseClock.now() + leaseMs);
      await this.extendBy(leaseMs);
      this.requestedUntil = Math.max(this.requestedUntil, this.heldUntil);
      // Watched at this end, not the one before (see `expiry`): `extendLease('1s')` after `'10m'` brought
      // it forward, and a heartbeat queued behind this call that then hangs went unnoticed until the later
      // end, while the store's lease had run out at this one.
      if (this.expiry !== undefined) {
        this.disarmExpiry();
        this.armExpiry();
      }
    });
  }

  /** `extension` once every extension asked for before it has settled (see `lastExtension`). */
  private serially(extension: () => Promise<void>): Promise<void> {
    const previous = this.lastExtension;
    const next = previous === undefined ? extension() : previous.then(extension, extension);
    this.lastExtension = next.catch(() => undefined);
    return next;
  }

  /** Push the lease's end to `leaseMs` from now in the store, and count it down from the ask. */
  private async extendBy(leaseMs: number): Promise<void> {
    const { store, namespace } = this.env;
    if (this.aborted) throw this.signal.reason;
    if (this.overtime()) throw this.signal.reason;
    // Before the call, not at its reply (see `heldUntil`).
    const askedAt = this.env.leaseClock.now();
    let held: boolean;
    try {
      held = await store.extend(this.storageKey, this.token, leaseMs);
      // Checked, never trusted (see store-answers.ts): a truthy non-boolean would count as extended.
      if (typeof held !== 'boolean') throw malformedAnswerError(store.name, 'extend', held);
    } catch (error) {
      this.report('onStoreError', {
        namespace,
        storageKey: this.storageKey,
        operation: 'extend',
        error,
      });
      throw new StoreUnavailableError(`Store '${store.name}' failed to extend the lease`, {
        cause: error,
      });
    }
    if (this.stopped) return;
    if (!held) {
      this.lose();
      throw this.signal.reason;
    }
    // Not a maximum: a shorter extension (`extendLease('1s')` after `'10m'`) shortened it in the store too.
    // Extensions never overlap (see `lastExtension`), so this is the call the store ran last.
    this.heldUntil = askedAt + leaseMs;
  }

  /**
   * Throw the {@link LeaseLostError} if this execution can no longer count on its lease: lost already, past
   * `maxExecution`, or run out on the engine's clock with no extension (the store refuses an expired lease's
   * writes even when nobody took the key over). For a step about to start an effect it could not record.
   */
  assertHeld(): void {
    if (this.aborted) throw this.signal.reason;
    if (this.overtime()) throw this.signal.reason;
    if (this.env.leaseClock.now() >= this.heldUntil) {
      this.lose();
      throw this.signal.reason;
    }
  }

  /** One heartbeat (called by the engine's {@link Heartbeats}); never rejects. */
  async beat(): Promise<void> {
    if (this.stopped) return;
    if (this.overtime()) {
      this.unschedule();
      return;
    }
    // Until this beat extends the lease, its end is watched (see `expiry`): the call may fail, or hang.
    this.armExpiry();
    try {
      await this.serially(async () => {
        // The run may have ended while the extension before this one was in flight.
        if (this.stopped) return;
        // Never sooner than the end the handler asked for (see `requestedUntil`), read once the
        // extensions before this one are over; whole milliseconds, as stores take them.
        await this.extendBy(
          Math.max(this.leaseMs, Math.ceil(this.requestedUntil - this.env.leaseClock.now())),
        );
      });
      this.disarmExpiry();
    } catch {
      // A store error is survivable while the lease has time left: try again at the next beat. Once the
      // lease has run out with no successful extension, the claim may be taken over, so abort.
      if (!this.aborted && this.env.leaseClock.now() >= this.heldUntil) this.lose();
    }
    // A lost lease is never extended again, nor watched.
    if (this.aborted) {
      this.unschedule();
      this.disarmExpiry();
    }
  }

  /**
   * True once the execution has run past `maxExecution`: it is then treated as hung. Its lease is not
   * extended again (it runs out within one lease, and a retry may take the key over), and its signal aborts
   * now, so a handler that is only slow can stop before that happens.
   */
  private overtime(): boolean {
    // A finished run (stopped) is past caring: nothing to abort, nothing to count.
    if (this.stopped || this.env.leaseClock.now() < this.deadline) return false;
    if (!this.aborted) {
      this.lose(
        `Execution exceeded maxExecution: the lease of token ${this.token} is no longer extended and will be taken over`,
      );
    }
    return true;
  }

  /** Call a hook in the run's own async context (see `runScope`). */
  private report<
    K extends
      | 'onLeaseLost'
      | 'onStoreError'
      | 'onStepRecorded'
      | 'onStepReplayed'
      | 'onReplicationShort',
  >(name: K, event: Parameters<NonNullable<IdempotencyHooks[K]>>[0] & HookEvent): void {
    const { hooks } = this.env;
    if (this.runScope === undefined) emit(hooks, name, event);
    else this.runScope.runInAsyncScope(emit, undefined, hooks, name, event);
  }

  private lose(message?: string): void {
    if (this.aborted) return;
    this.report('onLeaseLost', {
      namespace: this.env.namespace,
      storageKey: this.storageKey,
      token: this.token,
    });
    this.controller ??= new AbortController();
    this.controller.abort(new LeaseLostError(this.token, message));
  }
}
