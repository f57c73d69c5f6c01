import { describe, expect, it } from 'vitest';
import { memoryStore } from '../../src/index.js';
import { storeConformanceChecks } from '../../src/testing/index.js';
import { brokenStore } from '../helpers/broken-store.js';

function checkNamed(faults: Parameters<typeof brokenStore>[0], fragment: string) {
  const check = storeConformanceChecks({
    name: 'broken',
    createStore: () => brokenStore(faults),
  }).find((c) => c.name.includes(fragment));
  if (check === undefined) throw new Error(`no check named like '${fragment}'`);
  return check;
}

describe('the store conformance suite', () => {
  it('fails a store whose claim is a read followed by a write', async () => {
    // Arrange
    const check = checkNamed({ nonAtomicClaim: true }, '50 concurrent claims');
    // Act / Assert
    await expect(check.run()).rejects.toThrow(/exactly one winner/);
  });

  it('fails a store whose claim is not atomic across interleaved keys', async () => {
    const check = checkNamed({ nonAtomicClaim: true }, 'one winner per key');
    await expect(check.run()).rejects.toThrow(/exactly one winner/);
  });

  it('fails a store whose complete ignores the fencing token', async () => {
    const check = checkNamed({ unfencedComplete: true }, 'fences out complete');
    await expect(check.run()).rejects.toThrow(/complete/);
  });

  it('fails a store that lets a stale holder complete after a takeover', async () => {
    const check = checkNamed({ unfencedComplete: true }, 'takes over an expired lease');
    await expect(check.run()).rejects.toThrow(/stale complete/);
  });

  it('fails a store that lets another request take over a crashed claim', async () => {
    const check = checkNamed({ unreservedClaim: true }, 'keeps a crashed claim’s key reserved');
    await expect(check.run()).rejects.toThrow(/another fingerprint must not take a reserved key/);
  });

  it('fails a store that lists a live lease as a crashed claim', async () => {
    const check = checkNamed({ listsLiveLeases: true }, 'listCrashed lists each crashed claim');
    await expect(check.run()).rejects.toThrow(/a live lease is not crashed/);
  });

  it('passes the same checks on the correct memory store', async () => {
    const checks = storeConformanceChecks({ name: 'memory', createStore: () => memoryStore() });
    for (const fragment of [
      '50 concurrent claims',
      'fences out complete',
      'takes over an expired lease',
      'keeps a crashed claim’s key reserved',
      'listCrashed lists each crashed claim',
    ]) {
      await checks.find((c) => c.name.includes(fragment))!.run();
    }
  });

  it('fails a store shared across processes when no cross-process storm is configured, unless skipped knowingly', async () => {
    // Arrange: the memory store, declaring itself shared (as any networked store does).
    const shared = () => {
      const store = memoryStore();
      return { ...store, capabilities: { ...store.capabilities, crossProcess: true } };
    };
    const named = 'is given a cross-process storm';
    const unconfigured = storeConformanceChecks({ name: 'shared', createStore: shared });
    const skipped = storeConformanceChecks({
      name: 'shared',
      createStore: shared,
      crossProcess: false,
    });
    const local = storeConformanceChecks({ name: 'memory', createStore: () => memoryStore() });
    // Act / Assert
    await expect(unconfigured.find((c) => c.name.startsWith(named))?.run()).rejects.toThrow(
      /pass `crossProcess`.*or `crossProcess: false`/,
    );
    expect(skipped.some((c) => c.name.startsWith(named) || c.name.includes('OS processes'))).toBe(
      false,
    );
    await expect(local.find((c) => c.name.startsWith(named))?.run()).resolves.toBeUndefined();
  });
});
