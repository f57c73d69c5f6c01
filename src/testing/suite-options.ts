/**
 * The options of the store conformance checks, and their validation: a misspelt or mistyped option is
 * refused when the checks are built, so it fails the file where it is written instead of running a check
 * other than the one asked for.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import type { Store } from '../store/store.js';
import type { CrossProcessOptions } from './claim-storm.js';
import type { StoreClock } from './clock-check.js';
import { CROSS_PROCESS_FIELDS, checkOptionNames, STORE_SUITE_FIELDS } from './option-names.js';
import { checkTakeoverStormOptions } from './takeover-storm.js';

/** Options of the conformance checks. */
export interface StoreSuiteOptions {
  /** Name shown in test titles. */
  name: string;
  /**
   * Build a connected store. Called once per check with a unique `prefix` that the store may use to keep
   * its keys apart (a Redis key prefix, say); checks also use unique keys of their own.
   */
  createStore(prefix: string): Promise<Store> | Store;
  /** Dispose of a store built by `createStore` (close the clients it opened). */
  disposeStore?(store: Store): Promise<void> | void;
  /**
   * Run the cross-process claim storm with this configuration. Required for a store shared across
   * processes (`capabilities.crossProcess`): without it a check fails, since the one guarantee such a store
   * exists for would go unchecked; pass `false` to skip the storm knowingly (a suite that only wraps a
   * store already stormed elsewhere).
   */
  crossProcess?: CrossProcessOptions | false;
  /**
   * Whose clock the store judges leases and retentions by: `'backend'`, its backend's (a database
   * server's `NOW()`, Redis `TIME`; the suite then moves the process's clock and checks that nothing
   * follows it), or `'process'`, the clock of the process calling it (only for a backend with no clock
   * that lives on one machine: a SQLite file, memory). Required for a store shared across processes
   * (`capabilities.crossProcess`), whose clocks differ: without it a check fails.
   */
  storeClock?: StoreClock;
  /**
   * How many requests (commands, statements) the stores built by `createStore` have sent to their backend
   * so far: count them in the client you give the store (wrap its `query`, its command sender). With it,
   * a store that declares `capabilities.batch` must send each `claimMany`, `completeMany` and
   * `completeAndClaimMany` of distinct keys as one. Without it that promise goes unchecked: nothing a
   * store returns tells how many requests it sent.
   */
  roundTrips?: () => number | Promise<number>;
  /** Lease used by time-based checks, in ms; raise it for slow stores. @default 250 */
  shortLeaseMs?: number;
  /** Largest outcome round-tripped byte-exact. @default 1 MiB */
  maxOutcomeBytes?: number;
}

/** One named conformance check. */
export interface StoreCheck {
  /** What the check proves, in the test's words. */
  name: string;
  /** Runs the check; rejects when the store violates the contract. */
  run(): Promise<void>;
}

/**
 * Refuse `options` that name an unknown field or give a known one a value of the wrong kind, with an
 * {@link InvalidOptionsError}.
 */
export function checkSuiteOptions(options: StoreSuiteOptions): void {
  checkOptionNames(options, 'storeConformanceChecks', STORE_SUITE_FIELDS);
  if (options.crossProcess) {
    checkOptionNames(
      options.crossProcess,
      'storeConformanceChecks: crossProcess',
      CROSS_PROCESS_FIELDS,
    );
  }
  const { storeClock } = options;
  // Anything but 'process' would otherwise run as 'backend': a typo must not pick the check silently.
  if (storeClock !== undefined && storeClock !== 'backend' && storeClock !== 'process') {
    throw new InvalidOptionsError(
      `storeClock must be 'backend' or 'process', got ${JSON.stringify(storeClock)}`,
    );
  }
  if (options.roundTrips !== undefined && typeof options.roundTrips !== 'function') {
    throw new InvalidOptionsError(
      `roundTrips must be a function returning the requests sent so far, got ${typeof options.roundTrips}`,
    );
  }
  const takeovers = options.crossProcess ? options.crossProcess.takeovers : undefined;
  if (takeovers !== undefined && takeovers !== false) checkTakeoverStormOptions(takeovers);
}
