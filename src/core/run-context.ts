/**
 * The context `fn` receives for one execution under a claim.
 * @module
 */
import { type Duration, toMs } from './duration.js';
import type { RunContext } from './engine.js';
import { deriveDownstreamKey } from './key.js';
import type { LeaseKeeper } from './lease.js';
import { StepRecorder, type StepRunner } from './steps.js';

/**
 * A class rather than an object literal: `signal` must stay a lazy getter (an AbortController per run is a
 * measurable cost, and most handlers never read it), and V8 builds an object literal that has a getter
 * through its slow path, about 0.5 µs against some 20 ns for a class instance.
 */
export class ExecutionContext implements RunContext {
  readonly token: number;
  readonly attempt: number;
  readonly storageKey: string;
  // Own properties, not methods, so that they keep working when destructured (`const { extendLease } = ctx`).
  readonly extendLease: (leaseMs?: Duration) => Promise<void>;
  readonly downstreamKey: (step: string) => string;
  readonly step: StepRunner;
  readonly #lease: LeaseKeeper;
  readonly #leaseMs: number;

  /**
   * The lease `context`'s execution was claimed with, when it is one of this package's executions
   * (`undefined` for a fail-open run's context, or one from another copy of the package). Internal, not
   * part of `RunContext`: the consumers bound by it how long they keep a delivery alive once its handler
   * settled, also with an engine instance whose options they never saw.
   */
  static leaseMsOf(context: RunContext): number | undefined {
    return context instanceof ExecutionContext ? context.#leaseMs : undefined;
  }

  /**
   * Whether `error` is, by identity, the `StoreUnavailableError` a step of `context`'s execution threw
   * because its store call (`loadSteps`, `saveStep`) failed: the store is down, not the handler at fault,
   * and the engine leaves the claim to its lease. False for any other error (a handler's own
   * `StoreUnavailableError` included), and for a context that is not one of this package's executions.
   * Internal, not part of `RunContext`: a consumer redelivers such a failure later as a store outage,
   * instead of counting it toward `maxDeliveries` as a handler error.
   */
  static threwForStepStore(context: RunContext, error: unknown): boolean {
    return context instanceof ExecutionContext && context.#lease.threwForStepStore(error);
  }

  constructor(
    lease: LeaseKeeper,
    token: number,
    attempt: number,
    storageKey: string,
    leaseMs: number,
  ) {
    this.#lease = lease;
    this.#leaseMs = leaseMs;
    this.token = token;
    this.attempt = attempt;
    this.storageKey = storageKey;
    this.extendLease = (ms) => lease.extend(ms === undefined ? leaseMs : toMs(ms, 'leaseMs'));
    this.downstreamKey = (step) => deriveDownstreamKey(storageKey, step);
    // The recorder is built on the first step: most executions have none.
    let steps: StepRecorder | undefined;
    this.step = (name, fn, options) => {
      steps ??= new StepRecorder(lease, attempt);
      return steps.run(name, fn, options);
    };
  }

  /** Aborts, with a `LeaseLostError` reason, when this execution's lease is lost. */
  get signal(): AbortSignal {
    return this.#lease.signal;
  }
}
