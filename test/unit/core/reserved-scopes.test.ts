import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { deadLetterScope } from '../../../src/consumer/given-up.js';
import { handedBackScope } from '../../../src/consumer/handed-back.js';
import { consumerScope } from '../../../src/consumer/options.js';
import { storageKey } from '../../../src/core/key.js';
import {
  isReservedScope,
  RESERVED_SCOPE_PREFIXES,
  runStorageKey,
  SCOPE_SOURCE,
} from '../../../src/core/reserved-scopes.js';

const http = (scope: unknown, key: string) => ({ key, scope, [SCOPE_SOURCE]: 'http' }) as const;
const name = fc.string({ minLength: 1, maxLength: 40 });
const key = fc.string({ minLength: 1, maxLength: 40 });

describe('reserved scopes', () => {
  it("reserves every scope a component builds for itself (a consumer's, handed-back, dead-letter)", () => {
    fc.assert(
      fc.property(name, (consumer) => {
        expect(isReservedScope(consumerScope(consumer))).toBe(true);
        expect(isReservedScope(handedBackScope(consumer))).toBe(true);
        expect(isReservedScope(deadLetterScope(consumer))).toBe(true);
      }),
    );
  });

  it('never gives an outside scope the storage key of a reserved scope, whatever the strings', () => {
    const reserved = fc
      .tuple(fc.constantFrom(...RESERVED_SCOPE_PREFIXES), name)
      .map(([prefix, rest]) => prefix + rest);
    fc.assert(
      fc.property(
        fc.string(),
        reserved,
        fc.oneof(fc.string(), reserved),
        key,
        (ns, own, outside, k) => {
          expect(runStorageKey(ns, http(outside, k))).not.toBe(storageKey(ns, own, k));
        },
      ),
    );
  });

  it('keys every other outside scope exactly as before, and a run without a source as before', () => {
    const unreserved = fc.string().filter((scope) => !isReservedScope(scope));
    fc.assert(
      fc.property(fc.string(), unreserved, key, (ns, scope, k) => {
        expect(runStorageKey(ns, http(scope, k))).toBe(storageKey(ns, scope, k));
      }),
    );
    expect(runStorageKey('default', { key: 'k', scope: 'consumer:orders' })).toBe(
      storageKey('default', 'consumer:orders', 'k'),
    );
    // A number scope (taken as it always was) is never reserved.
    expect(runStorageKey('default', http(7, 'k'))).toBe(
      '6d938bc911e185671ee474f76de7cb451ab1effb71c5f742226d738ca7954d44',
    );
  });

  it('pins the storage keys of both shapes (computed by the release before the change, and the new one)', () => {
    expect(storageKey('default', '', 'order-1001')).toBe(
      '551484c8eef3b6ce99a356d92a1cb417a7ea91726953dda976bc0b22a37e297b',
    );
    expect(storageKey('shop', 'acme:eu', 'k')).toBe(
      'e3f3f8cc797e4496a0c7c63c8aabf91d934b032d76374b983beb43bed545f376',
    );
    expect(runStorageKey('shop', http('acme:eu', 'k'))).toBe(
      'e3f3f8cc797e4496a0c7c63c8aabf91d934b032d76374b983beb43bed545f376',
    );
    expect(runStorageKey('default', http('consumer:orders', 'order-1001'))).toBe(
      '2588478c07ebd8dbf58be4aaf7c6c38d319df719b74f62974a2a47430f5c5805',
    );
  });
});
