/**
 * `defineStoreSuite`: registers every store conformance check as a Vitest test.
 * @module
 */
import { describe, it } from 'vitest';
import { type StoreSuiteOptions, storeConformanceChecks } from './store-checks.js';

/**
 * Register the store conformance suite in the current Vitest file. Every store shipped with
 * idempotency-kit passes it; a third-party store should too.
 * @example
 * import { defineStoreSuite } from 'idempotency-kit/testing';
 * defineStoreSuite({
 *   name: 'my-store',
 *   createStore: (prefix) => myStore({ client, prefix }),
 *   crossProcess: { module: new URL('./my-store-factory.js', import.meta.url) },
 * });
 */
export function defineStoreSuite(options: StoreSuiteOptions): void {
  // Checked here, not inside describe: a misspelt option fails the file where it is written.
  const checks = storeConformanceChecks(options);
  describe(`store conformance: ${options.name}`, () => {
    for (const check of checks) {
      it(check.name, () => check.run(), 60_000);
    }
  });
}
