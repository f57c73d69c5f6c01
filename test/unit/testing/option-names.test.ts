/**
 * The testing kit refuses option names it does not know, as every factory of the package does: a typo
 * (`crossProces`) would otherwise turn a check off in silence, and the suite would pass.
 */
import { describe, expect, it } from 'vitest';
import { isInvalidOptionsError, memoryStore } from '../../../src/index.js';
import {
  defineStoreSuite,
  runClaimStorm,
  runTakeoverStorm,
  type StoreSuiteOptions,
  storeConformanceChecks,
} from '../../../src/testing/index.js';

const module = new URL('./fixtures/takeover-factory.ts', import.meta.url);
const base: StoreSuiteOptions = { name: 'memory', createStore: () => memoryStore() };

function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a throw');
}

describe('testing kit option names', () => {
  it.each([
    [{ ...base, crossProces: { module } }, 'storeConformanceChecks: unknown field "crossProces"'],
    [{ ...base, storeClok: 'backend' }, 'storeConformanceChecks: unknown field "storeClok"'],
    [{ ...base, shortLease: 1000 }, 'storeConformanceChecks: unknown field "shortLease"'],
    [
      { ...base, crossProcess: { module, proceses: 2 } },
      'storeConformanceChecks: crossProcess: unknown field "proceses"',
    ],
  ])('storeConformanceChecks refuses %j', (options, message) => {
    // Act
    const error = thrown(() => storeConformanceChecks(options as StoreSuiteOptions));
    // Assert
    expect(isInvalidOptionsError(error), String(error)).toBe(true);
    expect(error.message).toContain(message);
    expect(error.message).toMatch(/; the fields are (name, createStore,|module, exportName,)/);
  });

  it('names the accepted crossProcess fields', () => {
    // Act
    const error = thrown(() =>
      storeConformanceChecks({ ...base, crossProcess: { module, timeout: 5 } as never }),
    );
    // Assert
    expect(error.message).toBe(
      'storeConformanceChecks: crossProcess: unknown field "timeout"; the fields are module, exportName, ' +
        'argument, processes, claimsPerProcess, keys, execArgv, timeoutMs, takeovers',
    );
  });

  it.each([[null], ['memory'], [[base]]])('refuses %j as options', (options) => {
    // Act
    const error = thrown(() => storeConformanceChecks(options as never));
    // Assert
    expect(isInvalidOptionsError(error), String(error)).toBe(true);
    expect(error.message).toMatch(/^storeConformanceChecks: expected an object of options/);
  });

  it('accepts every documented option', () => {
    // Act
    const checks = storeConformanceChecks({
      ...base,
      disposeStore: () => {},
      storeClock: 'process',
      roundTrips: () => 0,
      shortLeaseMs: 300,
      maxOutcomeBytes: 1024,
      crossProcess: {
        module,
        exportName: 'createStore',
        argument: {},
        processes: 2,
        claimsPerProcess: 10,
        keys: 5,
        execArgv: [],
        timeoutMs: 10_000,
        takeovers: { keys: 2, generations: 2, leaseMs: 500 },
      },
    });
    // Assert
    expect(checks.length).toBeGreaterThan(0);
  });

  it('defineStoreSuite refuses an unknown option where it is called, before registering a test', () => {
    // Act
    const error = thrown(() =>
      defineStoreSuite({ ...base, crossProces: false } as unknown as StoreSuiteOptions),
    );
    // Assert
    expect(isInvalidOptionsError(error), String(error)).toBe(true);
    expect(error.message).toContain('unknown field "crossProces"');
  });

  it('runClaimStorm and runTakeoverStorm refuse an unknown option before starting a process', async () => {
    // Act
    const [claim, takeover] = await Promise.all([
      runClaimStorm({ module, proceses: 2 } as never, ['k']).catch((error: Error) => error),
      runTakeoverStorm({ module, claimsPerProces: 1 } as never, ['k']).catch(
        (error: Error) => error,
      ),
    ]);
    // Assert
    expect(isInvalidOptionsError(claim), String(claim)).toBe(true);
    expect((claim as Error).message).toContain('runClaimStorm: unknown field "proceses"');
    expect(isInvalidOptionsError(takeover), String(takeover)).toBe(true);
    expect((takeover as Error).message).toContain(
      'runTakeoverStorm: unknown field "claimsPerProces"',
    );
  });
});
