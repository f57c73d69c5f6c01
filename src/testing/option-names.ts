/**
 * The option names the testing kit's entry points accept, and the check that refuses any other: a typo
 * (`crossProces`, `storeClok`) left the setting at its default in silence, which for these options means a
 * check skipped or run the wrong way (no cross-process storm, no clock check), and a suite that passes.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import { knownFields, shownValue } from '../core/option-checks.js';
import type { CrossProcessOptions } from './claim-storm.js';
import type { StoreSuiteOptions } from './suite-options.js';

// Records keyed by the interfaces' keys: a field added to an interface and not here fails to compile.
const STORE_SUITE: Readonly<Record<keyof StoreSuiteOptions, true>> = {
  name: true,
  createStore: true,
  disposeStore: true,
  crossProcess: true,
  storeClock: true,
  roundTrips: true,
  shortLeaseMs: true,
  maxOutcomeBytes: true,
};
const CROSS_PROCESS: Readonly<Record<keyof CrossProcessOptions, true>> = {
  module: true,
  exportName: true,
  argument: true,
  processes: true,
  claimsPerProcess: true,
  keys: true,
  execArgv: true,
  timeoutMs: true,
  takeovers: true,
};

/** The fields of `StoreSuiteOptions`. */
export const STORE_SUITE_FIELDS: readonly string[] = Object.keys(STORE_SUITE);

/** The fields of `CrossProcessOptions`. */
export const CROSS_PROCESS_FIELDS: readonly string[] = Object.keys(CROSS_PROCESS);

/**
 * Refuse `value` unless it is an object whose fields are all in `fields`.
 * @param name - Who is refusing, for the message (`storeConformanceChecks`, `crossProcess`).
 * @throws InvalidOptionsError naming the unknown field and the accepted ones.
 */
export function checkOptionNames(value: unknown, name: string, fields: readonly string[]): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidOptionsError(
      `${name}: expected an object of options, got ${shownValue(value)}`,
    );
  }
  knownFields(value, name, fields);
}
