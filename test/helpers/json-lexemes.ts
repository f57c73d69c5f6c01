/**
 * JSON number lexemes for the fuzz tests of exact numbers: an arbitrary of number texts, written as
 * non-JavaScript clients write them (up to 20 integer and 19 fraction digits, exponents past the range of
 * doubles), their exact values, and the near miss of a lexeme.
 */
import fc from 'fast-check';

/**
 * A JSON number's exact decimal value as `[-]0.<significant digits>e<exponent>`, computed without doubles,
 * so that two lexemes are the same number exactly when their values are equal.
 */
export function exactValue(lexeme: string): string {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(lexeme);
  if (match === null) throw new Error(`not a JSON number: ${lexeme}`);
  const [, sign, whole = '', fraction = '', exponent = '0'] = match;
  const digits = whole + fraction;
  const leading = digits.length - digits.replace(/^0+/, '').length;
  const significant = digits.slice(leading).replace(/0+$/, '');
  if (significant === '') return '0';
  return `${sign}0.${significant}e${whole.length - leading + Number(exponent)}`;
}

/** A JSON number's text: sign, integer part, optional fraction and exponent. */
export const jsonNumberLexeme = fc
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

/**
 * `lexeme` with the last digit of its mantissa set to `digit`: for a long lexeme, the closest other number,
 * which a double most often cannot tell apart.
 */
export function nearMiss(lexeme: string, digit: number): string {
  return lexeme.replace(/(\d)([eE].*)?$/, (_m, _d, exponent = '') => `${digit}${exponent}`);
}
