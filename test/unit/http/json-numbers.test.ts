import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ExactDecimal } from '../../../src/core/exact-decimal.js';
import {
  mayHaveBeenRounded,
  numberParsesExactly,
  parseJsonExactly,
} from '../../../src/http/json-numbers.js';

// A JSON number's exact decimal value as [sign, significant digits, exponent] (value = 0.digits × 10^exp),
// written without doubles, so that two lexemes are the same number exactly when their forms are equal.
function exactValue(lexeme: string): string {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(lexeme);
  if (match === null) throw new Error(`not a JSON number: ${lexeme}`);
  const [, sign, whole = '', fraction = '', exponent = '0'] = match;
  const digits = whole + fraction;
  const leading = digits.length - digits.replace(/^0+/, '').length;
  const significant = digits.slice(leading).replace(/0+$/, '');
  if (significant === '') return '0';
  return `${sign}0.${significant}e${whole.length - leading + Number(exponent)}`;
}

const lexeme = fc
  .tuple(
    fc.boolean(),
    fc.stringMatching(/^(0|[1-9]\d{0,19})$/),
    fc.option(fc.stringMatching(/^\d{1,19}$/), { nil: undefined }),
    fc.option(fc.integer({ min: -330, max: 330 }), { nil: undefined }),
  )
  .map(
    ([negative, whole, fraction, exponent]) =>
      `${negative ? '-' : ''}${whole}${fraction === undefined ? '' : `.${fraction}`}${exponent === undefined ? '' : `e${exponent}`}`,
  );

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
      fc.property(lexeme, lexeme, fc.integer({ min: 0, max: 9 }), (a, other, digit) => {
        // Arrange: besides an unrelated number, `a` with its last digit changed (the near miss)
        const nearMiss = /\d$/.test(a.replace(/e.*$/, ''))
          ? a.replace(/(\d)(e.*)?$/, (_m, _d, e = '') => `${digit}${e}`)
          : other;
        for (const b of [other, nearMiss]) {
          // Act
          const exact = numberParsesExactly(a) && numberParsesExactly(b);
          // Assert
          if (exact) {
            expect(Number(a) === Number(b), `${a} vs ${b}`).toBe(exactValue(a) === exactValue(b));
          }
        }
      }),
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

describe('mayHaveBeenRounded', () => {
  it('flags unsafe integers, infinities and values whose shortest form is long', () => {
    // Arrange / Act / Assert
    for (const value of [2 ** 53, -(2 ** 63), 1e21, Number.POSITIVE_INFINITY, 0.1 + 0.2, 1 / 3]) {
      expect(mayHaveBeenRounded(value), String(value)).toBe(true);
    }
    for (const value of [0, -0, 19.99, 2 ** 53 - 1, 1.5e-7, 123456.789012345, -1e-300]) {
      expect(mayHaveBeenRounded(value), String(value)).toBe(false);
    }
  });

  it('flags every double two different numbers parse to, unless one of them is its short form (fuzz)', () => {
    fc.assert(
      fc.property(lexeme, fc.integer({ min: 0, max: 9 }), (a, digit) => {
        // Arrange: `a` with its last digit changed
        const b = a.replace(/(\d)(e.*)?$/, (_m, _d, e = '') => `${digit}${e}`);
        const parsed = Number(a);
        // The known miss: a long number differing from the double's short form only past 15 digits.
        const short = Number.isFinite(parsed) && !mayHaveBeenRounded(parsed);
        fc.pre(parsed === Number(b) && exactValue(a) !== exactValue(b) && parsed !== 0);
        // Act / Assert
        if (short) {
          const shortForm = String(parsed);
          expect(
            exactValue(a) === exactValue(shortForm) ||
              exactValue(b) === exactValue(shortForm) ||
              !numberParsesExactly(a) ||
              !numberParsesExactly(b),
          ).toBe(true);
        } else {
          expect(mayHaveBeenRounded(parsed)).toBe(true);
        }
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
      fc.property(lexeme, lexeme, (a, b) => {
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
