import { describe, expect, it } from 'vitest';
import { resolvePolicy } from '../../../src/http/options.js';
import { credentialScope, selectCookies } from '../../../src/http/scope.js';
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
