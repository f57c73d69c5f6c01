import { describe, expect, it } from 'vitest';
import { resolvePolicy } from '../../../src/http/options.js';
import { credentialScope, isNoScope, selectCookies } from '../../../src/http/scope.js';
import { isInvalidOptionsError } from '../../../src/index.js';

describe('default scope', () => {
  it('is empty without credentials and differs between callers', () => {
    expect(credentialScope(undefined, undefined)).toBe('');
    expect(credentialScope('Bearer a', undefined)).not.toBe(credentialScope('Bearer b', undefined));
    expect(credentialScope(undefined, 'sid=a')).not.toBe(credentialScope(undefined, 'sid=b'));
  });

  it('digests the whole Cookie header by default: any changed cookie is another scope', () => {
    expect(credentialScope(undefined, 'sid=a; lb=1')).not.toBe(
      credentialScope(undefined, 'sid=a; lb=2'),
    );
  });

  it('with scopeCookies, digests only the named cookies, whatever else comes and in any order', () => {
    // Arrange
    const names = new Set(['sid', 'tenant']);
    const scopeOf = (cookie: string) => credentialScope(undefined, cookie, names);
    // Act / Assert: other cookies and their order do not matter.
    expect(scopeOf('sid=a; lb=1; tenant=t')).toBe(scopeOf('_ga=x; tenant=t; lb=2;sid=a'));
    // The named cookies do, by value and by name.
    expect(scopeOf('sid=a; tenant=t')).not.toBe(scopeOf('sid=b; tenant=t'));
    expect(scopeOf('sid=a')).not.toBe(scopeOf('tenant=a'));
    // No named cookie and no Authorization: the empty scope, as for a request without credentials.
    expect(scopeOf('lb=1; _ga=x')).toBe('');
    // Authorization still counts.
    expect(credentialScope('Bearer a', 'sid=a', names)).not.toBe(
      credentialScope('Bearer b', 'sid=a', names),
    );
  });

  it('with scopeHeaders, tells apart callers who differ only by those headers (an API key)', () => {
    // Arrange
    const names = resolvePolicy({ scopeHeaders: ['X-API-Key', 'x-tenant'] }).scopeHeaders;
    const scopeOf = (apiKey?: string, tenant?: string, authorization?: string) =>
      credentialScope(authorization, undefined, undefined, [
        ['x-api-key', apiKey],
        ['x-tenant', tenant],
      ]);
    // Act / Assert
    expect(names).toEqual(['x-api-key', 'x-tenant']);
    expect(scopeOf('sk_alice')).not.toBe(scopeOf('sk_mallory'));
    expect(scopeOf('sk_alice')).not.toBe('');
    expect(scopeOf('a', 'b')).not.toBe(scopeOf('b', 'a'));
    expect(scopeOf('sk_alice', undefined, 'Bearer x')).not.toBe(scopeOf('sk_alice'));
    // None of the headers: the digest of Authorization and cookies alone, as without the option (storage
    // keys of requests without them do not change), and the empty scope without credentials at all.
    expect(scopeOf(undefined, undefined, 'Bearer x')).toBe(credentialScope('Bearer x', undefined));
    expect(scopeOf()).toBe('');
    expect(scopeOf('')).toBe('');
    // A header's value is never mistaken for the Authorization or Cookie header's.
    expect(scopeOf('Bearer x')).not.toBe(credentialScope('Bearer x', undefined));
  });

  it('refuses scopeHeaders that are not header names, or that are always in the scope', () => {
    for (const scopeHeaders of [['a b'], [''], [42], 'x-api-key', ['Authorization'], ['cookie']]) {
      let error: unknown;
      try {
        resolvePolicy({ scopeHeaders: scopeHeaders as unknown as string[] });
      } catch (caught) {
        error = caught;
      }
      expect(isInvalidOptionsError(error), JSON.stringify(scopeHeaders)).toBe(true);
    }
    expect(resolvePolicy({ scopeHeaders: ['B', 'a', 'b'] }).scopeHeaders).toEqual(['a', 'b']);
    expect(resolvePolicy({ scopeHeaders: [] }).scopeHeaders).toBeUndefined();
    expect(resolvePolicy({}).scopeHeaders).toBeUndefined();
  });

  it('picks named cookies by exact name, keeping repeated values in the order sent', () => {
    const names = new Set(['sid']);
    expect(selectCookies('xsid=1; sid=2; SID=3; sid=4', names)).toBe('sid=2; sid=4');
    expect(selectCookies('b=1; sid=2', new Set(['sid', 'b']))).toBe('b=1; sid=2');
    expect(selectCookies('sid; other=1', names)).toBe('sid');
  });

  it('refuses scopeCookies that are not cookie names', () => {
    for (const scopeCookies of [[], ['a b'], ['a;b'], [''], [42]] as unknown as string[][]) {
      let error: unknown;
      try {
        resolvePolicy({ scopeCookies });
      } catch (caught) {
        error = caught;
      }
      expect(isInvalidOptionsError(error)).toBe(true);
    }
    expect(resolvePolicy({ scopeCookies: ['sid', '__Host-session'] }).scopeCookies).toEqual(
      new Set(['sid', '__Host-session']),
    );
  });
});

describe('a scope function that gives no scope', () => {
  it("is undefined, null, '' or only whitespace; any other string or value is a scope as given", () => {
    for (const none of [undefined, null, '', ' ', '\t \n', '\u00a0'])
      expect(isNoScope(none)).toBe(true);
    for (const some of ['a', ' acme ', '0', 0, 42, false, {}]) expect(isNoScope(some)).toBe(false);
  });
});
