/**
 * Steps: the named phases of one execution whose results are recorded on its claim (H13's recovery
 * points). An attempt that takes over a crashed one for the same request does not run again the steps the
 * crashed attempt finished: it gets their recorded results. A step's side effect outside the store can
 * still repeat if the crash fell between the effect and the recording, which is why each step also gets a
 * downstream key for the provider's own deduplication.
 * @module
 */
import {
  InvalidOptionsError,
  isReplicationShortError,
  LeaseLostError,
  OutcomeEncodingError,
  ReplayedError,
  StoreUnavailableError,
} from './errors.js';
import { deriveDownstreamKey } from './key.js';
import type { LeaseKeeper } from './lease.js';
import { codecOption } from './option-checks.js';
import {
  decodeOutcome,
  defaultCodec,
  encodeErrorOutcome,
  encodeValueOutcome,
  type OutcomeCodec,
} from './outcome.js';

/** What a step's function is given. */
export interface StepContext {
  /**
   * The downstream key of this step (`ctx.downstreamKey(name)`): pass it to the provider the step calls,
   * so that a repeat after a crash between the call and its recording is deduplicated there.
   */
  readonly downstreamKey: string;
  /** The execution's attempt: more than 1 when it took over a crashed attempt. */
  readonly attempt: number;
}

/** Options of one step. */
export interface StepOptions {
  /** Encodes the step's result for the record. @default defaultCodec (JSON, bytes, undefined) */
  codec?: OutcomeCodec;
}

/** Runs one step: see {@link StepRecorder.run}. */
export type StepRunner = <S>(
  name: string,
  fn: (step: StepContext) => Promise<S> | S,
  options?: StepOptions,
) => Promise<S>;

// Names become field names in every store (a Redis hash field, a JSON object key): a safe, short alphabet.
const STEP_NAME = /^[A-Za-z0-9._:-]{1,100}$/;

/**
 * Check a step name against the alphabet every store relies on (`[A-Za-z0-9._:-]{1,100}`): the engine
 * checks before a step runs, and each store again before it writes, since a store may be called directly.
 * @param who Prefix of the error message (the caller's name).
 * @throws InvalidOptionsError for any other name.
 */
export function assertStepName(name: unknown, who: string): asserts name is string {
  if (typeof name !== 'string' || !STEP_NAME.test(name)) {
    throw new InvalidOptionsError(
      `${who}: a step name must match ${String(STEP_NAME)}, got ${JSON.stringify(name)}`,
    );
  }
}

/**
 * The checks every step passes before it runs, recorded or not (an execution that failed open follows
 * the same rules, so a handler does not change behaviour during an outage); marks `name` as used.
 * @returns the step's codec.
 */
function admitStep(
  names: Set<string>,
  name: string,
  fn: unknown,
  options: StepOptions | undefined,
): OutcomeCodec {
  assertStepName(name, 'ctx.step');
  // Checked before the step runs: a codec that cannot encode fails only after the step's effect (the
  // charge made), and that failure is recorded as final, so the request could never succeed again.
  const codec = codecOption(options?.codec, `ctx.step('${name}') codec`, defaultCodec);
  if (typeof fn !== 'function') {
    throw new InvalidOptionsError(`ctx.step('${name}'): the step must be a function`);
  }
  // Checked before any await, so two concurrent steps of one name are caught too.
  if (names.has(name)) {
    throw new InvalidOptionsError(`step '${name}' already ran in this execution`);
  }
  names.add(name);
  return codec;
}

/**
 * The steps of an execution that failed open (store unreachable, `failOpen`), or of a transactional
 * route's handler (a crash rolls its steps' writes back with the claim, so there is nothing to resume
 * from): nothing is recorded, but each step passes the same checks and returns its result as the codec
 * gives it back, as a recorded step does, so the handler sees what it would with the store up.
 * @param attempt - The execution's attempt, for the step's context (1 for a fail-open run).
 */
export function unrecordedSteps(storageKey: string, attempt = 1): StepRunner {
  const names = new Set<string>();
  return async (name, fn, options) => {
    const codec = admitStep(names, name, fn, options);
    const value = await fn({ downstreamKey: deriveDownstreamKey(storageKey, name), attempt });
    try {
      return codec.decode(codec.encode(value)) as typeof value;
    } catch (cause) {
      throw new OutcomeEncodingError(cause);
    }
  };
}

/**
 * The error of a step of a run that has ended: its claim is completed or released by the same execution,
 * so the step can no longer be recorded (a {@link LeaseLostError}, as for any step that cannot be).
 */
function ranAfterEnd(token: number, name: string): LeaseLostError {
  return new LeaseLostError(
    token,
    `step '${name}' was called after its execution ended (the handler returned or threw): not recorded, nor run if it had not started`,
  );
}

/** The steps of one execution: loads what earlier attempts recorded (once), records what this one runs. */
export class StepRecorder {
  readonly #lease: LeaseKeeper;
  readonly #attempt: number;
  readonly #names = new Set<string>();
  #recorded: Promise<Record<string, Uint8Array>> | undefined;

  constructor(lease: LeaseKeeper, attempt: number) {
    this.#lease = lease;
    this.#attempt = attempt;
  }

  /**
   * Run step `name` once per request: return its recorded result if an attempt this one took over
   * finished it, else run `fn`, record its result on the claim, and return it as recorded: decoded from
   * the bytes the store keeps, exactly what a takeover would get back (with the default codec a `Date`
   * is a string on every attempt, not only after a crash).
   * @throws InvalidOptionsError for an invalid or repeated name, a `fn` or `codec` that is not one, or a
   * store that cannot record steps (before `fn` runs).
   * @throws LeaseLostError when this execution no longer holds the key (nothing is recorded), without
   * running `fn` when that was already known (its signal aborted, or its run ended: the handler returned
   * or threw before the step was called).
   * @throws StoreUnavailableError when the store could not record the result (the step did run), or, on a
   * takeover, load the recorded steps (nothing ran). Either way the engine then leaves the claim to its
   * lease instead of releasing it, whatever the handler throws (engine.ts).
   * @throws OutcomeEncodingError when the step's result could not be encoded (the step did run; recorded
   * as its outcome), and on a takeover ReplayedError for such a recorded step (`original` describes the
   * OutcomeEncodingError). Either way the engine then keeps a failure as the key's final outcome instead
   * of releasing the claim, whatever the handler throws (engine.ts).
   */
  async run<S>(
    name: string,
    fn: (step: StepContext) => Promise<S> | S,
    options?: StepOptions,
  ): Promise<S> {
    const codec = admitStep(this.#names, name, fn, options);
    const lease = this.#lease;
    const store = lease.store;
    if (
      store.saveStep === undefined ||
      store.loadSteps === undefined ||
      !store.capabilities.steps
    ) {
      throw new InvalidOptionsError(`store '${store.name}' cannot record steps`);
    }
    // A step started once the run has ended (left running by a handler that returned or threw: a sibling
    // of a failed step in Promise.all, a timer, code after an HTTP response) could not be recorded: the
    // claim is completed, or released, and a retry then runs the step again. Its effect (a charge) must
    // not start: run on, it made a second charge beside the retry's, and was reported as a lost lease.
    if (lease.ended) throw ranAfterEnd(lease.token, name);
    // A first attempt has nothing recorded: only a takeover asks the store.
    if (this.#attempt > 1) {
      this.#recorded ??= this.#load();
      const recorded = await this.#recorded;
      // Own properties only: a step named `constructor` must not find Object.prototype's.
      if (Object.hasOwn(recorded, name)) {
        const decoded = decodeOutcome(recorded[name] as Uint8Array);
        if (decoded.kind === 'value') {
          const replayed = codec.decode(decoded.payload) as S;
          lease.reportStep(name, this.#attempt);
          return replayed;
        }
        // A step that ran but whose result could not be encoded: it must not run again either. Nor may
        // the claim be released now: a release would delete this record, and the next retry would run the
        // step's effect. The failure is as final as it was on the attempt that recorded it (engine.ts).
        lease.reportStep(name, this.#attempt);
        throw lease.stepFailed(new ReplayedError(decoded.error), recorded[name] as Uint8Array);
      }
    }
    // A lease already known lost (a heartbeat or extendLease was fenced out, or maxExecution passed): the
    // key is, or will be, another attempt's, and this step could not be recorded. Its effect (a charge)
    // must not start; the takeover makes the call.
    lease.assertHeld();
    const startedAt = lease.now();
    const value = await fn({
      downstreamKey: deriveDownstreamKey(lease.storageKey, name),
      attempt: this.#attempt,
    });
    const durationMs = lease.now() - startedAt;
    // The step ran: a result the codec cannot encode is recorded as that failure, so that a takeover
    // gets it back (a ReplayedError) instead of running the step's effect a second time.
    // The result is also decoded before it is recorded: a codec that cannot read back what it wrote would
    // otherwise fail every takeover (and, returning what the store holds, this attempt) after the effect.
    let encodingError: OutcomeEncodingError | undefined;
    let result: S | undefined;
    let bytes: Uint8Array;
    try {
      const encoded = codec.encode(value);
      result = codec.decode(encoded) as S;
      bytes = encodeValueOutcome(encoded);
    } catch (cause) {
      encodingError = new OutcomeEncodingError(cause);
      bytes = encodeErrorOutcome(encodingError);
    }
    let saved: boolean;
    try {
      saved = await store.saveStep(lease.storageKey, lease.token, name, bytes);
    } catch (error) {
      // Recorded, but short of its replicas: the step ran, so the handler goes on (reported).
      if (isReplicationShortError(error)) {
        saved = lease.replicationShort(error);
      } else {
        // The step ran and the store may or may not hold its result (a timeout after the write): the
        // claim is no longer the engine's to release (LeaseKeeper.stepStoreFailure).
        throw lease.stepStoreFailure(
          'saveStep',
          error,
          new StoreUnavailableError(`Store '${store.name}' failed to record step '${name}'`, {
            cause: error,
          }),
        );
      }
    }
    // Refused because the run ended while the step ran (this execution completed or released the claim):
    // not a lost lease, so not reported as one.
    if (!saved) throw lease.ended ? ranAfterEnd(lease.token, name) : lease.fencedOut();
    lease.reportStep(name, this.#attempt, durationMs);
    // Recorded as a failure: whatever the handler throws next, the claim must not be released.
    if (encodingError !== undefined) throw lease.stepFailed(encodingError, bytes);
    // What the store holds, not `value` itself: the code after the step must see on the first attempt
    // what a takeover sees. Handing back the live value instead (a Date, a Map, a class instance, a field
    // set to undefined) let a handler pass its first run and throw on every takeover, and the throw
    // released the claim with its recorded steps: the next retry ran the charge again.
    return result as S;
  }

  async #load(): Promise<Record<string, Uint8Array>> {
    const lease = this.#lease;
    const store = lease.store;
    let steps: Record<string, Uint8Array> | undefined;
    try {
      steps = await store.loadSteps?.(lease.storageKey, lease.token);
    } catch (error) {
      // The crashed attempt's steps are still on the claim: a release would delete them (see
      // LeaseKeeper.stepStoreFailure), and the next attempt would run its charge again.
      throw lease.stepStoreFailure(
        'loadSteps',
        error,
        new StoreUnavailableError(`Store '${store.name}' failed to load the recorded steps`, {
          cause: error,
        }),
      );
    }
    if (steps === undefined) throw lease.fencedOut();
    return steps;
  }
}
