/**
 * The `currentIdempotency()` context of a transactional route's handler (`asyncContext: true`): the
 * middleware's fields, read from the claim the transactional mode made (`tx`), so that a helper written
 * for the middleware (`publishWithKey()`) carries the same key here.
 *
 * The lease fields keep the middleware's types but have nothing to watch: the claim is the transaction's
 * own row, held until COMMIT or ROLLBACK, which no other attempt can take over meanwhile.
 * @module
 */
import type { Duration } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import { deriveDownstreamKey } from '../core/key.js';
import { type StepRunner, unrecordedSteps } from '../core/steps.js';
import type { IdempotencyContext } from './context.js';

/** The claim's details that both transactional modes hand their handler with `tx`. */
interface ClaimDetails {
  readonly token: number;
  readonly attempt: number;
  readonly storageKey: string;
  downstreamKey(step: string): string;
}

// One for every context: there is no lease to extend, and nothing to wait for.
const extendNothing = (_leaseMs?: Duration): Promise<void> => Promise.resolve();

/**
 * A transactional handler's context. A class, as the engine's `ExecutionContext`: `signal` stays a lazy
 * getter (an AbortController only for a handler that reads it), and the functions are own properties, so
 * they keep working when destructured.
 */
export class TransactionalContext implements IdempotencyContext {
  readonly key: string;
  readonly scope: string;
  readonly storageKey: string;
  readonly token: number;
  /** The record's attempt, as `tx.attempt` (not PostgreSQL's serialization retries: `tx.transactionAttempt`). */
  readonly attempt: number;
  /**
   * Derived from the storage key as both modes derive `tx.downstreamKey`: the same value for the same
   * step, so either may be used. Not a call to `tx`'s: work the handler leaves running keeps this context,
   * and must not keep the transaction's connection with it.
   */
  readonly downstreamKey: (step: string) => string;
  /** Resolves at once: the transaction holds the claim until it ends, there is no lease to extend. */
  readonly extendLease: (leaseMs?: Duration) => Promise<void> = extendNothing;
  /**
   * Runs the step without recording it: a crash rolls back the step's writes with the claim, so a retry
   * runs the whole handler again, and the step's `downstreamKey` (the same on every attempt) is what
   * keeps a provider from acting twice.
   */
  readonly step: StepRunner;
  #signal: AbortSignal | undefined;

  /**
   * @param tx - The mode's transaction context (`postgresTransactional`'s or `sqliteTransactional`'s).
   * @throws InvalidOptionsError for a `tx` without the claim's details (a runner of another kind).
   */
  constructor(key: string, scope: string, tx: unknown) {
    const claim = tx as Partial<ClaimDetails> | null;
    if (typeof claim?.downstreamKey !== 'function' || typeof claim.storageKey !== 'string') {
      throw new InvalidOptionsError(
        'transactional route: asyncContext needs a transactional mode whose tx has downstreamKey() and storageKey (postgresTransactional or sqliteTransactional)',
      );
    }
    const { storageKey, attempt = 1 } = claim;
    this.key = key;
    this.scope = scope;
    this.storageKey = storageKey;
    this.token = claim.token ?? 0;
    this.attempt = attempt;
    this.downstreamKey = (step) => deriveDownstreamKey(storageKey, step);
    // The recorder's state is made on the first step: most handlers have none.
    let steps: StepRunner | undefined;
    this.step = (name, fn, options) => {
      steps ??= unrecordedSteps(storageKey, attempt);
      return steps(name, fn, options);
    };
  }

  /**
   * Never aborts: no other attempt can take the claim while the transaction is open. If the transaction
   * is lost (a dropped connection), the handler's next statement fails and nothing it wrote commits.
   */
  get signal(): AbortSignal {
    this.#signal ??= new AbortController().signal;
    return this.#signal;
  }
}
