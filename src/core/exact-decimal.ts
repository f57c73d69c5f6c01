/**
 * A JSON number kept exactly, for the numbers a double would round (an int64 id such as
 * 9223372036854775807, 1e400, 0.300000000000000041): the fingerprint encodes it by its exact decimal value,
 * so two numbers that parse to one double still fingerprint apart (`http/json-numbers.ts` finds them).
 * @module
 */

/** A decimal number by its exact value, in a canonical form: equal values, equal forms. */
export class ExactDecimal {
  /**
   * `[-]<digits>e<exponent>` for the value `±0.<digits> × 10^exponent`, the digits without leading or
   * trailing zeros (zero itself is `0`). `1200` is `12e4`, `-0.0015` is `-15e-2`.
   */
  readonly canonical: string;

  private constructor(canonical: string) {
    this.canonical = canonical;
  }

  /**
   * The exact value of a JSON number's text (`-12.5e3`); the text must be a valid JSON number.
   * @example
   * ExactDecimal.fromJson('9223372036854775807').canonical; // '9223372036854775807e19'
   */
  static fromJson(lexeme: string): ExactDecimal {
    return ExactDecimal.fromJsonText(lexeme, 0, lexeme.length);
  }

  /**
   * {@link ExactDecimal.fromJson} of the number `text[start, end)`, without cutting it out of the text
   * first (the exact JSON reader finds numbers inside a body). One pass over its characters: a body of
   * numbers that all need this (`[1e400,1e400,…]`) is a cost a client chooses.
   * @example
   * ExactDecimal.fromJsonText('[1e400]', 1, 6).canonical; // '1e401'
   */
  static fromJsonText(text: string, start: number, end: number): ExactDecimal {
    const negative = text.charCodeAt(start) === MINUS;
    // The first and last non-zero digits of the mantissa, the point, and the value's magnitude: the digits
    // before the point from the first non-zero one, or for a value below 1 the zeros after the point before
    // its first non-zero digit, negated (the value is 0.<digits> × 10^(magnitude + exponent)).
    let first = -1;
    let last = -1;
    let point = -1;
    let magnitude = 0;
    let i = negative ? start + 1 : start;
    for (; i < end; i++) {
      const code = text.charCodeAt(i);
      if (code === DOT) point = i;
      else if (code === LOWER_E || code === UPPER_E) break;
      else if (code !== ZERO) {
        if (first === -1) first = i;
        last = i;
        if (point === -1) magnitude++;
      } else if (first === -1) {
        if (point !== -1) magnitude--;
      } else if (point === -1) magnitude++;
    }
    if (first === -1) return new ExactDecimal('0');
    const digits =
      point > first && point < last
        ? text.slice(first, point) + text.slice(point + 1, last + 1)
        : text.slice(first, last + 1);
    return new ExactDecimal(
      `${negative ? '-' : ''}${digits}e${exponentText(text, i + 1, end, magnitude)}`,
    );
  }
}

const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const LOWER_E = 0x65;
const UPPER_E = 0x45;

// `magnitude` plus the exponent written at text[from, end) (none when from > end), as decimal text.
function exponentText(text: string, from: number, end: number, magnitude: number): string {
  if (from > end) return String(magnitude);
  let i = from;
  const sign = text.charCodeAt(i);
  const negative = sign === MINUS;
  if (negative || sign === PLUS) i++;
  while (i < end && text.charCodeAt(i) === ZERO) i++;
  // Up to 15 digits are a double exactly; exponents past 2^53 (only in hostile bodies) are added exactly
  // as BigInts.
  if (end - i >= 16) return String(BigInt(magnitude) + BigInt(text.slice(from, end)));
  let written = 0;
  for (; i < end; i++) written = written * 10 + (text.charCodeAt(i) - ZERO);
  return String(magnitude + (negative ? -written : written));
}
