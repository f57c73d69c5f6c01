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
    const negative = lexeme.startsWith('-');
    const exponentAt = lexeme.search(/[eE]/);
    const mantissa = lexeme.slice(negative ? 1 : 0, exponentAt === -1 ? undefined : exponentAt);
    const point = mantissa.indexOf('.');
    const whole = point === -1 ? mantissa : mantissa.slice(0, point);
    const digits = point === -1 ? mantissa : whole + mantissa.slice(point + 1);
    const withoutLeading = digits.replace(/^0+/, '');
    const significant = withoutLeading.replace(/0+$/, '');
    if (significant === '') return new ExactDecimal('0');
    // The value is 0.<significant> × 10^(digits before the point, less the leading zeros, plus the exponent).
    const shift = whole.length - (digits.length - withoutLeading.length);
    const written = exponentAt === -1 ? '0' : lexeme.slice(exponentAt + 1);
    // Exponents past 2^53 (only in hostile bodies) are added exactly as BigInts.
    const exponent =
      written.replace(/^[+-]?0*/, '').length < 16
        ? String(shift + Number(written))
        : String(BigInt(shift) + BigInt(written));
    return new ExactDecimal(`${negative ? '-' : ''}${significant}e${exponent}`);
  }
}
