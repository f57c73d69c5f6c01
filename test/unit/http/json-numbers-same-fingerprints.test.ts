import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ExactDecimal } from '../../../src/core/exact-decimal.js';
import { httpFingerprint } from '../../../src/http/fingerprint.js';
import { mayHoldRoundedNumber, parseJsonExactly } from '../../../src/http/json-numbers.js';
import { jsonNumberLexeme } from '../../helpers/json-lexemes.js';
import {
  exactFromJsonBefore,
  mayHoldRoundedNumberBefore,
  parseJsonExactlyBefore,
} from '../../helpers/json-numbers-before.js';

// The exact reader was made cheaper (it patches JSON.parse's value instead of building another, and
// decides most numbers from their digits): every fingerprint must stay byte for byte what it was, or a
// key stored before the change would answer 422 to its own retry.

const fingerprintOf = (body: unknown) =>
  httpFingerprint({
    method: 'POST',
    path: '/payments',
    query: '',
    contentType: 'application/json',
    body,
  });

// What the fingerprint hashed before the change for a JSON text: the old exact reading, for the texts the
// old check sent to it.
const readBefore = (text: string): unknown =>
  mayHoldRoundedNumberBefore(text) ? parseJsonExactlyBefore(text) : JSON.parse(text);

/** Numbers of every kind the exact reader tells apart, as clients (and attackers) write them. */
const numberText = fc.oneof(
  jsonNumberLexeme,
  // int64 and longer ids, which a double rounds
  fc.bigInt({ min: -(10n ** 21n), max: 10n ** 21n }).map(String),
  // doubles in their shortest form (stay doubles), and the same with a digit more
  fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
  fc
    .double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 })
    .map((value) => String(value))
    .map((text) =>
      text.includes('e') ? text : text.includes('.') ? `${text}1` : `${text}.00000000000000001`,
    ),
  // past the range of doubles, near its ends, zeros, and exponents written every way
  fc.constantFrom(
    '1e400',
    '-2E+400',
    '1e-400',
    '1.7976931348623157e308',
    '1.7976931348623159e308',
    '2e308',
    '5e-324',
    '2.4e-324',
    '2.5e-324',
    '1e-325',
    '0',
    '-0',
    '0.000e5',
    '-0e-99999',
    '12e+0005',
    '1e99999999999999999999',
    '1e9007199254740993',
    '-3.5e-9007199254740993',
    '-1.5e-00000000000000000000000000007',
    '0.30000000000000004',
    '0.300000000000000041',
    '9007199254740993',
    '123456789012345678e-10',
  ),
  // exponents around 2^53, where a double stops holding them exactly
  fc
    .tuple(
      fc.stringMatching(/^-?[1-9]\d{0,3}(\.\d{1,3})?$/),
      fc.bigInt({ min: -(10n ** 17n), max: 10n ** 17n }),
      fc.constantFrom('', '000'),
    )
    .map(([mantissa, exponent, zeros]) =>
      exponent < 0n ? `${mantissa}e-${zeros}${-exponent}` : `${mantissa}E+${zeros}${exponent}`,
    ),
  // 16 and 17 significant digits with an exponent near the limits of ±300
  fc
    .tuple(
      fc.stringMatching(/^[1-9]\d{15,16}$/),
      fc.integer({ min: -340, max: 330 }),
      fc.constantFrom('e', 'E', 'e+'),
    )
    .map(
      ([digits, exponent, e]) =>
        `${digits.slice(0, 1)}.${digits.slice(1)}${exponent < 0 ? 'e' : e}${exponent}`,
    ),
);

/** Keys from a small pool, so that objects often repeat one (JSON.parse keeps the last). */
const keyText = fc.constantFrom(
  '"a"',
  '"b"',
  '"id"',
  '"__proto__"',
  '"constructor"',
  '"k\\u0061"',
  '"ka"',
  '"q\\"x"',
  '"0"',
  '"1"',
);

const stringText = fc.oneof(
  fc.string({ maxLength: 12 }).map((value) => JSON.stringify(value)),
  fc.constantFrom('"a\\\\"', '"\\"9223372036854775807\\""', '"12345678901234567"', '"\\\\\\""'),
);

const space = fc.constantFrom('', '', ' ', '\n  ', '\t');

/** A JSON text as a client writes it: numbers as lexemes, random whitespace, repeated keys. */
const { value: valueText, container: containerText } = fc.letrec<{
  value: string;
  container: string;
  array: string;
  object: string;
}>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    numberText,
    stringText,
    fc.constantFrom('true', 'false', 'null'),
    tie('container'),
  ),
  container: fc.oneof(tie('array'), tie('object')),
  array: fc
    .tuple(fc.array(fc.tuple(space, tie('value'), space), { maxLength: 6 }), space)
    .map(([items, s]) =>
      items.length === 0 ? `[${s}]` : `[${items.map(([a, v, b]) => a + v + b).join(',')}]`,
    ),
  object: fc
    .tuple(fc.array(fc.tuple(keyText, space, tie('value'), space), { maxLength: 6 }), space)
    .map(([members, s]) =>
      members.length === 0
        ? `{${s}}`
        : `{${members.map(([k, a, v, b]) => `${a}${k}${b}:${a}${v}${b}`).join(',')}}`,
    ),
}));

describe('the exact JSON reader, against the reader before it was made cheaper', () => {
  it('gives every generated body the fingerprint it had before (fuzz)', () => {
    fc.assert(
      fc.property(containerText, space, (text, around) => {
        // Arrange
        const body = `${around}${text}${around}`;
        // Act / Assert: the new path from the bytes, the old reading handed over as a parsed body (which
        // the encoder writes the same way)
        expect(fingerprintOf(Buffer.from(body, 'utf8'))).toBe(fingerprintOf(readBefore(body)));
      }),
      { numRuns: 3000 },
    );
  });

  it('gives large objects, mostly of long numbers and at times repeating a key, the fingerprint they had (fuzz)', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.integer({ min: 0, max: 150 }),
            fc.oneof(
              { weight: 4, arbitrary: fc.constantFrom('1e400', '-2E+401', '9223372036854775807') },
              { weight: 2, arbitrary: numberText },
              { weight: 1, arbitrary: fc.constantFrom('"x"', '[1e400]', '{"a":1e400}') },
            ),
          ),
          { minLength: 30, maxLength: 150 },
        ),
        (members) => {
          // Arrange: past 32 replaced members an object is read afresh rather than patched
          const body = `{${members.map(([key, value]) => `"k${key}":${value}`).join(',')}}`;
          // Act / Assert
          expect(fingerprintOf(Buffer.from(body, 'utf8'))).toBe(fingerprintOf(readBefore(body)));
          expect(parseJsonExactly(body)).toEqual(parseJsonExactlyBefore(body));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('reads every generated text to the value the old reader gave, top-level numbers too (fuzz)', () => {
    fc.assert(
      fc.property(valueText, (text) => {
        // Act / Assert
        expect(mayHoldRoundedNumber(text)).toBe(mayHoldRoundedNumberBefore(text));
        expect(parseJsonExactly(text)).toEqual(parseJsonExactlyBefore(text));
      }),
      { numRuns: 3000 },
    );
  });

  it('gives every number the canonical form it had before (fuzz)', () => {
    fc.assert(
      fc.property(numberText, (lexeme) => {
        // Act / Assert
        expect(ExactDecimal.fromJson(lexeme).canonical).toBe(exactFromJsonBefore(lexeme).canonical);
        expect(ExactDecimal.fromJsonText(`[${lexeme}]`, 1, lexeme.length + 1).canonical).toBe(
          exactFromJsonBefore(lexeme).canonical,
        );
      }),
      { numRuns: 20000 },
    );
  });

  it('keeps the fingerprints captured before the change', () => {
    // Arrange: httpFingerprint of these bodies at a5b24d1 (POST /payments, application/json)
    const captured: Array<[string, string]> = [
      [
        '{"account_id":9223372036854775807,"amount":4200,"currency":"EUR"}',
        'fe155ad11d243c127f474a10db25517a81f15e8cbe2f92825fbfb9d324282235',
      ],
      [
        '{"account_id":9223372036854775806,"amount":4200,"currency":"EUR"}',
        'b88d8780345410a00bb95922466ca2847c8e292dac117c939a1970110c869263',
      ],
      [
        '[1e400,-2E+400,1e-400,0e99999]',
        'bae6d26aa82a6c8d6e506e004439220d639f47dab3fe7d5b1891e7ac879e3672',
      ],
      [
        '{"a":[1e400],"a":[1],"b":{"c":12345678901234567890},"b":{"c":1}}',
        '72edd4a27d2459dc1a7b5af67d80b3c0058ad250869c94285d7abc17b00ae6a8',
      ],
      [
        ' { "__proto__" : { "p" : 1e400 } , "k\\u0061" : 0.300000000000000041 , "ka" : 0.30000000000000004 } ',
        'de522f18a40f06a5aaa0a669d0069faeb88aa5faa11cd5e765d9a385916915d8',
      ],
      [
        '{"n":[0.10000000000000001,0.1,12345678.100000001,1.7976931348623157e308,2e308,5e-324,2.4e-324]}',
        '4da5d437ed8323e4b893432e949a30a0992ee63d45659ea05df8b630cdea9145',
      ],
      [
        '{"e":[1e99999999999999999999,-1.5e-00000000000000000000000000007,12e+0005]}',
        '1db626f6285330e26f76a6962f298de02b7db39e2d32f28482e327a0cb02057f',
      ],
      [
        '{"s":"a\\\\","t":"\\"9999999999999999\\"","u":[9999999999999999,99999999999999999999]}',
        'f68232edb60a05bdc7443c5b321b99810f4b87dbcf783f2f6d2c888b1af0d9cf',
      ],
    ];
    for (const [body, fingerprint] of captured) {
      // Act / Assert
      expect(fingerprintOf(Buffer.from(body, 'utf8')), body).toBe(fingerprint);
    }
  });

  it('never writes to a prototype when a repeated key leads the walk astray', () => {
    // Arrange: JSON.parse keeps the second "a" ({}), so the first one's "__proto__" is not in its value
    const text = '{"a":{"__proto__":{"p":1e400}},"a":{},"b":[1e400]}';
    // Act
    const parsed = parseJsonExactly(text) as { a: object; b: unknown[] };
    // Assert
    expect(({} as { p?: unknown }).p).toBeUndefined();
    expect(parsed).toEqual(parseJsonExactlyBefore(text));
    expect(parsed.b[0]).toBeInstanceOf(ExactDecimal);
  });
});
