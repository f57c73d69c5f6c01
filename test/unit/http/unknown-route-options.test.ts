/**
 * A route option the layer does not have was ignored in silence. `route({ scope })` (scope is the adapter's
 * option, not a route's) left the default scope in place: tenant B, sending tenant A's credentials, was
 * replayed tenant A's answer. Refused when the route is created, naming the option.
 */
import { describe, expect, it } from 'vitest';
import { type HttpRouteOptions, resolvePolicy } from '../../../src/http/options.js';

const invalid = (message: RegExp) =>
  expect.objectContaining({ code: 'invalid_options', message: expect.stringMatching(message) });
const untyped = (options: object) => options as HttpRouteOptions;

describe('route options: unknown names', () => {
  it('refuses scope on a route, saying it belongs to the adapter', () => {
    expect(() => resolvePolicy({}, untyped({ key: 'required', scope: () => 'tenant' }))).toThrow(
      invalid(/scope.*adapter/),
    );
  });

  it('refuses a misspelt route option, naming it and listing the accepted ones', () => {
    expect(() => resolvePolicy({}, untyped({ keys: 'required' }))).toThrow(
      invalid(/"keys".*key, methods, headerName/),
    );
  });

  it('refuses an engine option on a route', () => {
    expect(() => resolvePolicy({}, untyped({ namespace: 'orders' }))).toThrow(
      invalid(/"namespace"/),
    );
  });

  it('checks names only: a known option given as undefined is not given', () => {
    // Act
    const policy = resolvePolicy(
      { key: 'required', requestBodyLimit: 10 },
      untyped({ key: undefined, requestBodyLimit: undefined, leaseMs: undefined }),
    );
    // Assert: the defaults given (base), not the built-in ones
    expect(policy.key).toBe('required');
    expect(policy.requestBodyLimit).toBe(10);
    expect(policy.leaseMs).toBeUndefined();
  });
});
