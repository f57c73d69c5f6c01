import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isInvalidKeyError } from '../../../src/core/errors.js';
import { parseKeyHeader, parseKeyValue } from '../../../src/http/key-header.js';

const printable = fc.string({
  unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
  minLength: 1,
  maxLength: 255,
});
const serialize = (key: string) => `"${key.replace(/[\\"]/g, (c) => `\\${c}`)}"`;

describe('Idempotency-Key header parsing', () => {
  it('reads an sf-string, unescaping quotes and backslashes', () => {
    // Arrange / Act / Assert
    expect(parseKeyValue('"abc"')).toBe('abc');
    expect(parseKeyValue('"a \\"b\\" \\\\c"')).toBe('a "b" \\c');
    expect(parseKeyValue('  "padded"  ')).toBe('padded');
  });

  it('accepts a bare token, UUIDs starting with a digit included', () => {
    // Arrange
    const uuid = '8e03978e-40d5-43e8-bc93-6894a57f9324';
    // Act / Assert
    expect(parseKeyValue(uuid)).toBe(uuid);
    expect(parseKeyValue('order:42/retry*1')).toBe('order:42/retry*1');
  });

  it('ignores RFC 9651 parameters after the item', () => {
    // Arrange / Act / Assert
    expect(parseKeyValue('"abc";v=1')).toBe('abc');
    expect(parseKeyValue('abc; flag')).toBe('abc');
  });

  it.each([
    ['empty', ''],
    ['blank', '   '],
    ['empty string', '""'],
    ['unterminated', '"abc'],
    ['bad escape', '"a\\nb"'],
    ['tab inside', '"a\tb"'],
    ['control character', 'a\x01b'],
    ['non-ASCII', 'clé'],
    ['non-ASCII quoted', '"clé"'],
    ['a list', '"a", "b"'],
    ['a bare list', 'a, b'],
    ['inner space', 'has space'],
    ['256 characters', 'a'.repeat(256)],
    ['trailing garbage', '"abc"x'],
  ])('refuses %s', (_name, value) => {
    // Arrange / Act / Assert
    expect(() => parseKeyValue(value)).toThrow(expect.objectContaining({ code: 'invalid_key' }));
  });

  it('refuses two header lines and reports an absent header as absent', () => {
    // Arrange / Act / Assert
    expect(() => parseKeyHeader(['a', 'b'])).toThrow(
      expect.objectContaining({ code: 'invalid_key' }),
    );
    expect(parseKeyHeader(undefined)).toEqual({ present: false });
    expect(parseKeyHeader([])).toEqual({ present: false });
    expect(parseKeyHeader(['only'])).toEqual({ present: true, key: 'only' });
  });

  it('round-trips every printable key of 1–255 characters through its sf-string form', () => {
    fc.assert(
      fc.property(printable, (key) => {
        // Act / Assert
        expect(parseKeyValue(serialize(key))).toBe(key);
      }),
    );
  });

  it('answers a long value with runs of spaces in linear time', () => {
    // Arrange: before the fix, the trim's regex took seconds on the first one (quadratic in the run)
    const spaces = ' '.repeat(100_000);
    const values = [
      ` a${spaces}x`,
      `\ta${spaces}x `,
      `a${spaces}x`,
      `a;p=1${spaces}x`,
      `"a${spaces}`,
      ` ${spaces}a${spaces}`,
    ];
    for (const value of values) {
      const started = performance.now();
      // Act
      let outcome: unknown;
      try {
        outcome = parseKeyValue(value);
      } catch (error) {
        outcome = error;
      }
      // Assert
      expect(performance.now() - started, JSON.stringify(value.slice(0, 8))).toBeLessThan(250);
      expect(outcome === 'a' || isInvalidKeyError(outcome)).toBe(true);
    }
  });

  it('either returns a valid key or throws InvalidKeyError for any input (fuzz)', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300, unit: 'binary' }), (value) => {
        // Act
        let key: string;
        try {
          key = parseKeyValue(value);
        } catch (error) {
          // Assert: only the documented error, never a crash of another kind.
          expect(isInvalidKeyError(error)).toBe(true);
          return;
        }
        expect(key.length).toBeGreaterThanOrEqual(1);
        expect(key.length).toBeLessThanOrEqual(255);
        expect(key).toMatch(/^[\x20-\x7e]+$/);
      }),
      { numRuns: 2000 },
    );
  });
});
