/**
 * What a consumer's handler receives besides the message: its {@link ConsumerContext}, and with the
 * consumer's `asyncContext: true` the same object as its `currentIdempotency()` context.
 * @module
 */
import type { RunContext } from '../core/engine.js';
import type { IdempotencyContext } from '../http/context.js';
import type { ConsumerContext } from './options.js';

/**
 * What the handler receives. A class rather than an object literal: `signal` stays a lazy getter (the
 * engine only creates the AbortSignal for handlers that read it), and V8 builds a literal with a getter
 * through its slow path, about 0.5 µs per message against some 20 ns for a class instance.
 */
export class HandlerContext implements ConsumerContext {
  readonly token: number;
  readonly attempt: number;
  // Own properties, so that they keep working when destructured (`const { extendLease } = ctx`).
  readonly extendLease: RunContext['extendLease'];
  readonly downstreamKey: (step: string) => string;
  readonly step: RunContext['step'];
  readonly #run: RunContext;

  constructor(
    readonly key: string,
    readonly deliveryCount: number,
    run: RunContext,
  ) {
    this.#run = run;
    this.token = run.token;
    this.attempt = run.attempt;
    this.extendLease = run.extendLease;
    this.downstreamKey = run.downstreamKey;
    this.step = run.step;
  }

  get signal(): AbortSignal {
    return this.#run.signal;
  }
}

/**
 * The handler's context of a consumer created with `asyncContext: true`, which `currentIdempotency()`
 * also returns in the handler's call tree: one object, so both give the same key, token, attempt,
 * `downstreamKey`, `step`, and the same `signal` and `extendLease` of the execution's real lease. Adds
 * what `IdempotencyContext` has beyond a `ConsumerContext`: the consumer's scope and the storage key.
 * Made only with the option on: the consumer's hot path allocates nothing more without it.
 */
export class CurrentHandlerContext extends HandlerContext implements IdempotencyContext {
  /** The storage key (hashed), as the engine's run has it. */
  readonly storageKey: string;

  constructor(
    key: string,
    deliveryCount: number,
    run: RunContext,
    /** The consumer's scope (`consumerScope(name)`), which its keys are stored under. */
    readonly scope: string,
  ) {
    super(key, deliveryCount, run);
    this.storageKey = run.storageKey;
  }
}
