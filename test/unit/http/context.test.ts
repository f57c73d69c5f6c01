import { describe, expect, it } from 'vitest';
import { currentIdempotency } from '../../../src/http/context.js';
import { resolvePolicy } from '../../../src/http/options.js';

describe('currentIdempotency()', () => {
  it('throws a fix-naming error until an adapter turns asyncContext on, then returns undefined outside a request', () => {
    // Arrange / Act / Assert: nothing enabled it yet in this module instance.
    expect(() => currentIdempotency()).toThrow(/asyncContext: true/);
    // Act
    resolvePolicy({ asyncContext: true });
    // Assert
    expect(currentIdempotency()).toBeUndefined();
  });
});
