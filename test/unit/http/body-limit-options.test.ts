/**
 * `requestBodyLimit`, one of the route options every adapter shares: resolved with the others (a route's
 * value over the adapter's), checked when the middleware is created, and picked out of an adapter's
 * options object.
 */
import { describe, expect, it } from 'vitest';
import { idempotency as honoIdempotency } from '../../../src/hono/index.js';
import { resolvePolicy, routeOptionsOf } from '../../../src/http/index.js';
import { memoryStore } from '../../../src/index.js';

describe('requestBodyLimit', () => {
  it('defaults to 1 MiB, and takes a byte count, 0 or false', () => {
    // Act / Assert
    expect(resolvePolicy({}).requestBodyLimit).toBe(1024 * 1024);
    expect(resolvePolicy({ requestBodyLimit: 0 }).requestBodyLimit).toBe(0);
    expect(resolvePolicy({ requestBodyLimit: 5000 }).requestBodyLimit).toBe(5000);
    expect(resolvePolicy({ requestBodyLimit: false }).requestBodyLimit).toBe(false);
  });

  it("takes a route's value over the adapter's, false included", () => {
    // Arrange
    const base = routeOptionsOf({ requestBodyLimit: 2048 });
    // Act / Assert
    expect(resolvePolicy(base).requestBodyLimit).toBe(2048);
    expect(resolvePolicy(base, { requestBodyLimit: false }).requestBodyLimit).toBe(false);
    expect(resolvePolicy(base, { requestBodyLimit: undefined }).requestBodyLimit).toBe(2048);
  });

  it('refuses anything but a non-negative integer or false, naming the option', () => {
    // Act / Assert
    for (const value of [-1, 1.5, Number.NaN, '1mb', '1024', true, null]) {
      expect(() => resolvePolicy({ requestBodyLimit: value as number })).toThrow(
        expect.objectContaining({
          code: 'invalid_options',
          message: expect.stringMatching(/^requestBodyLimit: /),
        }),
      );
    }
  });

  it('is checked when a middleware is created, not on its first request', () => {
    // Act / Assert
    const idem = honoIdempotency({ store: memoryStore() });
    expect(() => idem.route({ requestBodyLimit: -1 })).toThrow(/requestBodyLimit/);
  });
});
