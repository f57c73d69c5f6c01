import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ExactDecimal } from '../../../src/core/exact-decimal.js';
import {
  mayHoldRoundedNumber,
  numberParsesExactly,
  parseJsonExactly,
} from '../../../src/http/json-numbers.js';
import { exactValue, jsonNumberLexeme, nearMiss } from '../../helpers/json-lexemes.js';

describe('numberParsesExactly', () => {
  it('rules short numbers exact and long or far ones not', () => {
    // Arrange / Act / Assert
    for (const lexeme of [
      '0',
      '-0',
      '0.0',
      '0e99999',
      '1e2',
      '-1.5E-3',
      '123456789012345',
      '12e20',
    ]) {
      expect(numberParsesExactly(lexeme), lexeme).toBe(true);
    }
    for (const lexeme of [
      '9223372036854775807',
      '-12345678901234567',
      '0.30000000000000004',
      '1e400',
    ]) {
      expect(numberParsesExactly(lexeme), lexeme).toBe(false);
    }
  });

  it('never lets two different numbers it rules exact parse to one double (fuzz)', () => {
    fc.assert(
      fc.property(
        jsonNumberLexeme,
        jsonNumberLexeme,
        fc.integer({ min: 0, max: 9 }),
        (a, other, digit) => {
          // Arrange: besides an unrelated number, `a` with its last digit changed (the near miss)
          for (const b of [other, nearMiss(a, digit)]) {
            // Act
            const exact = numberParsesExactly(a) && numberParsesExactly(b);
            // Assert
            if (exact) {
              expect(Number(a) === Number(b), `${a} vs ${b}`).toBe(exactValue(a) === exactValue(b));
            }
          }
        },
      ),
      { numRuns: 20000 },
    );
  });

  it('rules exact only what parses exactly, near the limits', () => {
    // Arrange / Act / Assert: 15 significant digits, and the exponent range
    expect(numberParsesExactly('999999999999999')).toBe(true);
    expect(numberParsesExactly('9999999999999999')).toBe(false);
    expect(numberParsesExactly('0.000999999999999999')).toBe(true);
    expect(numberParsesExactly('1e299')).toBe(true);
    expect(numberParsesExactly('1e-300')).toBe(true);
    expect(numberParsesExactly('1e-301')).toBe(true);
    expect(numberParsesExactly('1e-302')).toBe(false);
    expect(numberParsesExactly('1e300')).toBe(false);
    expect(numberParsesExactly('0.1e300')).toBe(true);
    expect(numberParsesExactly('0.1e301')).toBe(false);
    expect(numberParsesExactly('10e298')).toBe(true);
    expect(numberParsesExactly('100e298')).toBe(false);
  });
});

describe('mayHoldRoundedNumber', () => {
  it('flags a text with a long or far number, and not the usual body', () => {
    // Arrange / Act / Assert
    for (const text of [
      '{"account":9223372036854775807}',
      '[1e400]',
      '{"a":-2E-400}',
      '0.30000000000000004',
      // Long numbers whose double has a short form (0.1, 12345678.1, 0): a check of the doubles misses them.
      '{"price":0.10000000000000001}',
      '{"price":12345678.100000001}',
      '[1e-400]',
    ]) {
      expect(mayHoldRoundedNumber(text), text).toBe(true);
    }
    for (const text of [
      '{"amount":19.99,"qty":3,"ts":1732600000123}',
      '[123456789012345, 0.000001, 1e99, -1.5E-30, 1234567.1234567]',
      '{"name":"order 12345678","v":"1.2.3"}',
    ]) {
      expect(mayHoldRoundedNumber(text), text).toBe(false);
    }
  });

  it('flags every number that does not parse exactly, alone or inside a text (fuzz)', () => {
    fc.assert(
      fc.property(jsonNumberLexeme, fc.integer({ min: 0, max: 9 }), (a, digit) => {
        for (const number of [a, nearMiss(a, digit)]) {
          // Act / Assert: `false` promises the exact reading is JSON.parse's
          if (!numberParsesExactly(number)) {
            expect(mayHoldRoundedNumber(number), number).toBe(true);
            expect(mayHoldRoundedNumber(`{"n":[1,${number},"x"]}`), number).toBe(true);
          }
        }
      }),
      { numRuns: 20000 },
    );
  });

  it('passing, promises that the exact reading is JSON.parse (fuzz)', () => {
    fc.assert(
      fc.property(fc.array(jsonNumberLexeme, { minLength: 1, maxLength: 4 }), (numbers) => {
        // Arrange
        const text = `{"n":[${numbers.join(',')}]}`;
        fc.pre(!mayHoldRoundedNumber(text));
        // Act / Assert
        expect(parseJsonExactly(text)).toEqual(JSON.parse(text));
      }),
      { numRuns: 5000 },
    );
  });
});

describe('parseJsonExactly', () => {
  it('is JSON.parse for any JSON text whose numbers parse exactly (fuzz)', () => {
    fc.assert(
      fc.property(fc.json(), (text) => {
        // Arrange
        const numbers = text.replace(/"(?:[^"\\]|\\.)*"/g, '""').match(/-?\d[\d.eE+-]*/g) ?? [];
        fc.pre(numbers.every(numberParsesExactly));
        // Act / Assert
        expect(parseJsonExactly(text)).toEqual(JSON.parse(text));
      }),
      { numRuns: 2000 },
    );
  });

  it('is JSON.parse for any text JSON.stringify writes: doubles in their shortest form stay doubles (fuzz)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        // Arrange
        const text = JSON.stringify(value);
        // Act / Assert
        expect(parseJsonExactly(text)).toEqual(JSON.parse(text));
      }),
      { numRuns: 2000 },
    );
  });

  it('keeps the numbers a double would round, by their exact value, and only those', () => {
    // Arrange
    const text =
      ' { "id" : 9223372036854775807 , "__proto__": [1e400, -0.300000000000000041, 12, "x\\"y"], "n": 0.30000000000000004 } ';
    // Act
    const parsed = parseJsonExactly(text) as Record<string, unknown>;
    // Assert
    expect(Object.keys(parsed)).toEqual(['id', '__proto__', 'n']);
    expect(parsed.id).toEqual(ExactDecimal.fromJson('9223372036854775807'));
    expect((parsed.id as ExactDecimal).canonical).toBe('9223372036854775807e19');
    expect(Object.getOwnPropertyDescriptor(parsed, '__proto__')?.value).toEqual([
      ExactDecimal.fromJson('1e400'),
      ExactDecimal.fromJson('-0.300000000000000041'),
      12,
      'x"y',
    ]);
    // A double's own shortest form stays a double: it names one number.
    expect(parsed.n).toBe(0.1 + 0.2);
  });

  it('gives one canonical form to one value, however it is written (fuzz)', () => {
    fc.assert(
      fc.property(jsonNumberLexeme, jsonNumberLexeme, (a, b) => {
        // Act / Assert
        expect(ExactDecimal.fromJson(a).canonical === ExactDecimal.fromJson(b).canonical).toBe(
          exactValue(a) === exactValue(b),
        );
        // The same value with zeros around its digits: 12.5e3 as 0012.5000e3
        const padded = a.replace(
          /^(-?)(\d+)(\.\d+)?/,
          (_m, sign: string, whole: string, fraction = '.') => `${sign}00${whole}${fraction}000`,
        );
        expect(ExactDecimal.fromJson(padded).canonical).toBe(ExactDecimal.fromJson(a).canonical);
      }),
      { numRuns: 5000 },
    );
  });

  it('refuses to recurse past 300 levels', () => {
    // Arrange / Act / Assert
    expect(() => parseJsonExactly(`${'['.repeat(400)}1e400${']'.repeat(400)}`)).toThrow(RangeError);
  });
});
