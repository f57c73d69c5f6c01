/**
 * The exact JSON reader as it was before it was made cheaper (`src/http/json-numbers.ts` and
 * `ExactDecimal.fromJson` at commit a5b24d1), kept as the oracle of the fuzz test that proves the
 * fingerprints unchanged (`test/unit/http/json-numbers-same-fingerprints.test.ts`) and as the "before" row
 * of `bench/json-numbers.ts`. Its logic is verbatim; only the names differ, and its exact numbers are real
 * {@link ExactDecimal}s (built around their canonical form) so the fingerprint encodes them as it always did.
 */

import { ExactDecimal } from '../../src/core/exact-decimal.js';

// An ExactDecimal holding `canonical`, without going through the parser under test.
function exactDecimalOf(canonical: string): ExactDecimal {
  return Object.assign(Object.create(ExactDecimal.prototype) as ExactDecimal, { canonical });
}

/** `ExactDecimal.fromJson` before: the exact value of a JSON number's text, in its canonical form. */
export function exactFromJsonBefore(lexeme: string): ExactDecimal {
  const negative = lexeme.startsWith('-');
  const exponentAt = lexeme.search(/[eE]/);
  const mantissa = lexeme.slice(negative ? 1 : 0, exponentAt === -1 ? undefined : exponentAt);
  const point = mantissa.indexOf('.');
  const whole = point === -1 ? mantissa : mantissa.slice(0, point);
  const digits = point === -1 ? mantissa : whole + mantissa.slice(point + 1);
  const withoutLeading = digits.replace(/^0+/, '');
  const significant = withoutLeading.replace(/0+$/, '');
  if (significant === '') return exactDecimalOf('0');
  // The value is 0.<significant> × 10^(digits before the point, less the leading zeros, plus the exponent).
  const shift = whole.length - (digits.length - withoutLeading.length);
  const written = exponentAt === -1 ? '0' : lexeme.slice(exponentAt + 1);
  // Exponents past 2^53 (only in hostile bodies) are added exactly as BigInts.
  const exponent =
    written.replace(/^[+-]?0*/, '').length < 16
      ? String(shift + Number(written))
      : String(BigInt(shift) + BigInt(written));
  return exactDecimalOf(`${negative ? '-' : ''}${significant}e${exponent}`);
}

const QUOTE = 0x22;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const LOWER_T = 0x74;
const LOWER_F = 0x66;
const LOWER_N = 0x6e;
const BACKSLASH = 0x5c;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
const LOWER_E = 0x65;
const UPPER_E = 0x45;

/** Significant digits a double holds for every decimal (`DBL_DIG`). */
const MAX_SIGNIFICANT_DIGITS = 15;
/** Decimal exponents well inside the normal range of doubles (about 1e-307 to 1.8e308). */
const MAX_DECIMAL_EXPONENT = 300;

/**
 * A number of more than 15 significant digits has 16 digits with at most a point among them, so a run of
 * at least 8: the cheap run filter comes first (most bodies fail it, or pass it with one timestamp). A
 * string holding such a run (a card number, a 19-digit id sent as text) matches too: that costs only the
 * exact reading, never a different fingerprint.
 */
const EIGHT_DIGITS = /\d{8}/;
const LONG_MANTISSA = /\d[\d.]{15}/;
/** Beyond the ±300 decimal exponents {@link numberParsesExactly} allows: a long mantissa, or this. */
const LONG_EXPONENT = /\d[eE][+-]?\d{3}/;

/**
 * Whether a JSON text may hold a number that does not parse exactly ({@link numberParsesExactly}): a
 * number `JSON.parse` may have read as the double another number is read as. Looks at the text, not at the
 * parsed doubles, so it also sees a long number whose double has a short form (`0.10000000000000001` is
 * read as `0.1`). `false` guarantees `parseJsonExactly(text)` would give what `JSON.parse(text)` gives.
 * @example
 * mayHoldRoundedNumber('{"account":9223372036854775807}'); // true
 * mayHoldRoundedNumber('{"amount":19.99,"qty":3}'); // false
 */
export function mayHoldRoundedNumberBefore(text: string): boolean {
  return (EIGHT_DIGITS.test(text) && LONG_MANTISSA.test(text)) || LONG_EXPONENT.test(text);
}

/**
 * `true` when `lexeme`, a JSON number's text, parses to a double no other number parses to: at most 15
 * significant digits (`DBL_DIG`: such decimals survive a round trip through a double) and a decimal
 * exponent within ±300, inside the normal range of doubles; zero, however written, is exact.
 * @example
 * numberParsesExactly('19.99'); // true
 * numberParsesExactly('9223372036854775807'); // false
 */
function numberParsesExactly(lexeme: string): boolean {
  const negative = lexeme.charCodeAt(0) === MINUS;
  return parsesExactly(lexeme, negative ? 1 : 0, lexeme.length);
}

// The index after the closing quote of a string whose content starts at `i`.
function afterString(text: string, i: number): number {
  const length = text.length;
  while (i < length) {
    const code = text.charCodeAt(i);
    if (code === BACKSLASH) i += 2;
    else if (code === QUOTE) return i + 1;
    else i++;
  }
  return length;
}

function numberEnd(text: string, i: number): number {
  let end = i + 1;
  while (end < text.length) {
    const code = text.charCodeAt(end);
    const partOfNumber =
      (code >= ZERO && code <= NINE) ||
      code === DOT ||
      code === LOWER_E ||
      code === UPPER_E ||
      code === PLUS ||
      code === MINUS;
    if (!partOfNumber) break;
    end++;
  }
  return end;
}

// A JSON number without its sign, text[start, end): digits, an optional fraction, an optional exponent.
function parsesExactly(text: string, start: number, end: number): boolean {
  let significant = 0;
  // Digits seen before the decimal point, counted from the first non-zero digit (the value's magnitude);
  // for a value below 1, the zeros after the point before the first non-zero digit, negated.
  let magnitude = 0;
  let trailingZeros = 0;
  let seenPoint = false;
  let i = start;
  for (; i < end; i++) {
    const code = text.charCodeAt(i);
    if (code === DOT) {
      seenPoint = true;
      continue;
    }
    if (code === LOWER_E || code === UPPER_E) break;
    if (significant === 0 && code === ZERO) {
      if (seenPoint) magnitude--;
      continue;
    }
    significant++;
    trailingZeros = code === ZERO ? trailingZeros + 1 : 0;
    if (!seenPoint) magnitude++;
  }
  // Zero, however written (`0`, `-0.000`, `0e999`), is exactly zero.
  if (significant === 0) return true;
  // Trailing zeros are significant only as a scale (`1200` is 12e2), which the magnitude already holds.
  if (significant - trailingZeros > MAX_SIGNIFICANT_DIGITS) return false;
  const exponent = i < end ? Number(text.slice(i + 1, end)) : 0;
  const decimalExponent = magnitude + exponent;
  return Math.abs(decimalExponent) <= MAX_DECIMAL_EXPONENT;
}

/** Nesting past the fingerprint's own limit (256) is refused there too; this bounds the recursion. */
const MAX_DEPTH = 300;

/**
 * `JSON.parse(text)` for a text `JSON.parse` accepted, except that a number that does not parse exactly
 * ({@link numberParsesExactly}) and is not its double's shortest form is an {@link ExactDecimal}; every
 * other value is what `JSON.parse` gives, so a body's fingerprint changes only where a number was rounded.
 * @throws RangeError when the text nests deeper than 300 levels.
 * @example
 * parseJsonExactly('{"account":9223372036854775807}'); // { account: ExactDecimal('9223372036854775807e19') }
 */
export function parseJsonExactlyBefore(text: string): unknown {
  return new ExactJsonReader(text).value(0);
}

// A recursive descent over a text already known to be valid JSON, so nothing is validated twice.
class ExactJsonReader {
  private at = 0;

  constructor(private readonly text: string) {}

  value(depth: number): unknown {
    if (depth > MAX_DEPTH) throw new RangeError('JSON nested too deeply');
    this.skipSpace();
    const text = this.text;
    const start = this.at;
    switch (text.charCodeAt(start)) {
      case OPEN_BRACE:
        return this.object(depth);
      case OPEN_BRACKET:
        return this.array(depth);
      case QUOTE:
        return this.string();
      case LOWER_T:
        this.at += 4;
        return true;
      case LOWER_F:
        this.at += 5;
        return false;
      case LOWER_N:
        this.at += 4;
        return null;
      default: {
        const end = numberEnd(text, start);
        this.at = end;
        const lexeme = text.slice(start, end);
        const value = Number(lexeme);
        // A double's own shortest form (what JSON.stringify writes: 0.30000000000000004) names one
        // number, and keeps the fingerprint it always had; any other long form is kept exact. The usual
        // case, a JS client's double, is that very string: no canonical forms needed.
        if (String(value) === lexeme || numberParsesExactly(lexeme)) return value;
        const exact = exactFromJsonBefore(lexeme);
        const shortest = Number.isFinite(value) && exactFromJsonBefore(String(value)).canonical;
        return shortest === exact.canonical ? value : exact;
      }
    }
  }

  private object(depth: number): Record<string, unknown> {
    const object: Record<string, unknown> = {};
    this.at++;
    this.skipSpace();
    if (this.text.charCodeAt(this.at) === CLOSE_BRACE) {
      this.at++;
      return object;
    }
    for (;;) {
      this.skipSpace();
      const name = this.string();
      this.skipSpace();
      this.at++; // ':'
      const member = this.value(depth + 1);
      // A `__proto__` member is a plain member, as JSON.parse makes it (an assignment would set the
      // prototype); an object made without a prototype would be slow in every other case.
      if (name === '__proto__') {
        Object.defineProperty(object, name, {
          value: member,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      } else object[name] = member;
      this.skipSpace();
      if (this.text.charCodeAt(this.at++) === CLOSE_BRACE) return object;
    }
  }

  private array(depth: number): unknown[] {
    const array: unknown[] = [];
    this.at++;
    this.skipSpace();
    if (this.text.charCodeAt(this.at) === CLOSE_BRACKET) {
      this.at++;
      return array;
    }
    for (;;) {
      array.push(this.value(depth + 1));
      this.skipSpace();
      if (this.text.charCodeAt(this.at++) === CLOSE_BRACKET) return array;
    }
  }

  // Escapes are decoded by JSON.parse itself, on the string's own text; a string without any is its text.
  private string(): string {
    const text = this.text;
    const start = this.at;
    let i = start + 1;
    for (;;) {
      const code = text.charCodeAt(i);
      if (code === QUOTE) {
        this.at = i + 1;
        return text.slice(start + 1, i);
      }
      if (code === BACKSLASH) break;
      i++;
    }
    const end = afterString(text, i);
    this.at = end;
    return JSON.parse(text.slice(start, end)) as string;
  }

  private skipSpace(): void {
    const text = this.text;
    let code = text.charCodeAt(this.at);
    while (code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09) {
      code = text.charCodeAt(++this.at);
    }
  }
}
