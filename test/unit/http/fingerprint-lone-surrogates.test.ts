/**
 * Lone surrogates and query bytes that are not UTF-8 in the HTTP fingerprint: each such request keeps a
 * fingerprint of its own (UTF-8 would write U+FFFD for every one of them), while every other request keeps
 * the fingerprint earlier releases stored for it (the pinned values below were computed before the change;
 * a record stored by an older release must keep matching its retry).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createFingerprint } from '../../../src/core/fingerprint.js';
import { generalisedUtf8, isWellFormed } from '../../../src/core/lone-surrogates.js';
import { canonicalQuery, httpFingerprint } from '../../../src/http/fingerprint.js';

const json = 'application/json';
const base = { method: 'POST', path: '/orders', query: '', contentType: json };
type Parts = Parameters<typeof httpFingerprint>[0];

// Any UTF-16 code unit, lone surrogates included, drawn often from around the surrogate range.
const anyUnits = fc.string({
  unit: fc
    .oneof(
      fc.integer({ min: 0, max: 0xffff }),
      fc.integer({ min: 0xd7ff, max: 0xe000 }),
      fc.constantFrom(0xfffd, 0x61, 0xe9),
    )
    .map((c) => String.fromCharCode(c)),
  maxLength: 8,
});

describe('fingerprints of requests without a lone surrogate', () => {
  // Computed on the release before lone surrogates were told apart: they must never change.
  const pinned: Array<[string, Parts, string]> = [
    [
      'JSON bytes',
      {
        ...base,
        body: Buffer.from(
          '{"currency":"EUR","amount":100,"memo":"caf\\u00e9 \u6771\u4eac \ud83d\ude00"}',
        ),
      },
      '43071d8f4f8d5628effd41f5d47f7bad6e5b74f6b6a501355197b8009a5054cb',
    ],
    [
      'JSON parsed by a framework',
      {
        ...base,
        method: 'post',
        contentType: 'application/json; charset=utf-8',
        body: {
          amount: 100,
          currency: 'EUR',
          items: [{ sku: 'é', qty: 2 }],
          big: 9007199254740993n,
        },
      },
      '0b65a06dd74ec1995c293ac8e499a72337107d2f7d3938b9ff10531eff4f29e1',
    ],
    [
      'JSON holding U+FFFD and an escaped pair',
      {
        ...base,
        body: Buffer.from('{"memo":"\\ufffd \\ud83d\\ude00 \ufffd","n":12345678901234567890}'),
      },
      '2c56739bf620ea37b77533e90d7cbd0222c91eb419d0c92fb662ba895f6cb5d4',
    ],
    [
      'raw bytes, some not UTF-8',
      {
        method: 'PUT',
        path: '/files/1',
        query: '',
        contentType: 'application/octet-stream',
        body: Buffer.from([0, 1, 0xed, 0xa0, 0x80, 0xef, 0xbf, 0xbd, 0xff]),
      },
      '787f240cfc808e4923be2fda710da106265a991be769b35ba0e5133832c39262',
    ],
    [
      'text body as a string',
      {
        ...base,
        path: '/notes',
        contentType: 'text/plain; charset=utf-8',
        body: 'Grüße \u6771\u4eac \ud83d\ude00 \ufffd',
      },
      '5f456068535109ea8b2ce46e11e8052bcb0d246fc742ad0fc3fdc66a8438edf8',
    ],
    [
      'query, sorted and percent-decoded, U+FFFD written as UTF-8',
      {
        method: 'POST',
        path: '/search',
        query: '?q=caf%C3%A9+au+lait&b=2&a=%EF%BF%BD&b=1&x=%F0%9F%98%80',
        contentType: undefined,
        body: undefined,
      },
      '34420873ff95f80fddbc462ca40670a9f90a1917679392ef27eca32c10924ef3',
    ],
    [
      'path and headers',
      {
        ...base,
        method: 'PATCH',
        path: '/users/%C3%A9/caf\u00e9/\u6771\ufffd',
        headers: { 'API-Version': '2024-01-01', 'x-tenant': 't\u00e9nant' },
        body: { name: 'x' },
      },
      '2675c15ccfb238a09fba2490b08590a7d3cc00e6c3035308fbcce93eb1bc804e',
    ],
    [
      'multipart',
      {
        ...base,
        path: '/upload',
        contentType: 'multipart/form-data; boundary=b',
        body: Buffer.from(
          '--b\r\ncontent-disposition: form-data; name="f"; filename="\u00e9.txt"\r\n\r\nhello\r\n--b--',
        ),
      },
      '7791e3a530d956691b27138a936a397630fbda262bbb56864a7eb7c94c693245',
    ],
    [
      'invalid JSON, as bytes',
      { ...base, body: Buffer.from('{"memo":') },
      '6ab308794cfe1a0f6dd3d1912e0e2e24f40fe71147592db5ff2dfcf44b1edec9',
    ],
  ];

  it.each(pinned)('%s: the fingerprint earlier releases stored', (_name, parts, fingerprint) => {
    expect(httpFingerprint(parts)).toBe(fingerprint);
  });

  it('createFingerprint: the value earlier releases gave', () => {
    expect(
      createFingerprint({
        a: 'caf\u00e9 \ud83d\ude00 \ufffd',
        b: [1, 'x', null, true],
        c: Buffer.from('hi'),
      }),
    ).toBe('9a926d43a356de6a839f3f5c59a878d4305d96616b162b5250972ec8961a678e');
  });

  it('reads a query as URLSearchParams does, unless a byte is not UTF-8 (fuzz)', () => {
    const piece = fc.constantFrom(
      ...['a', '=', '&', '+', '%', '%2', '%41', '%C3%A9', '%EF%BF%BD', '\ufffd', 'é', '%e2%82%ac'],
      ...['?', '%%', '%FF', '%ED%A0%80', '%C3'],
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
        // Arrange
        const query = pieces.join('');
        const decoded = [...new URLSearchParams(query.startsWith('?') ? query.slice(1) : query)];
        decoded.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
        // Act
        const canonical = canonicalQuery(query);
        // Assert: as before, or bytes that were U+FFFD kept as lone surrogates
        if (canonical.flat().every(isWellFormed)) expect(canonical).toEqual(decoded);
        else expect(decoded.flat().some((text) => text.includes('\ufffd'))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('fingerprints of requests with a lone surrogate', () => {
  it('tells apart JSON escapes of lone surrogates and U+FFFD, in values and in keys', () => {
    const bodies = [
      '{"memo":"\\ud800"}',
      '{"memo":"\\udc00"}',
      '{"memo":"\\ufffd"}',
      '{"memo":"\\ud800\\udc00"}',
      '{"memo":"\\udc00\\ud800"}',
      '{"\\ud800":1}',
      '{"\\ufffd":1}',
    ];
    const fingerprints = bodies.map((body) =>
      httpFingerprint({ ...base, body: Buffer.from(body) }),
    );
    expect(new Set(fingerprints).size).toBe(bodies.length);
    // The same request however written: key order, whitespace, escapes in either case.
    expect(httpFingerprint({ ...base, body: Buffer.from('{ "memo" : "\\uD800" }') })).toBe(
      fingerprints[0],
    );
    // The parsed body, the kept text and the bytes agree.
    expect(httpFingerprint({ ...base, body: { memo: '\ud800' } })).toBe(fingerprints[0]);
    expect(httpFingerprint({ ...base, body: '{"memo":"\\ud800"}' })).toBe(fingerprints[0]);
  });

  it('tells apart paths, headers, text bodies and queries holding one', () => {
    const variants = ['\ud800', '\udc00', '\ufffd', '\ud83d\ude00'];
    for (const make of [
      (v: string): Parts => ({ ...base, path: `/a${v}`, body: undefined }),
      (v: string): Parts => ({ ...base, headers: { 'x-memo': v }, body: undefined }),
      (v: string): Parts => ({ ...base, contentType: 'text/plain', body: v }),
      (v: string): Parts => ({ ...base, body: `"${v}"` }),
      (v: string): Parts => ({ ...base, query: `m=${v}`, body: undefined }),
    ]) {
      expect(new Set(variants.map((v) => httpFingerprint(make(v)))).size).toBe(variants.length);
    }
  });

  it('tells apart query bytes that are not UTF-8, each from the others and from U+FFFD', () => {
    const queries = [
      'm=%FF',
      'm=%FE',
      'm=%EF%BF%BD',
      'm=%ED%A0%80',
      'm=%C0%80',
      'm=%E2%82',
      'm=%FF%FF',
    ];
    const fingerprints = queries.map((query) =>
      httpFingerprint({ ...base, query, body: undefined }),
    );
    expect(new Set(fingerprints).size).toBe(queries.length);
    // Kept as one lone surrogate per byte, U+DC80–U+DCFF; UTF-8 around them read as before.
    expect(canonicalQuery('?b=%FF%C3%A9&a=%E2%82x')).toEqual([
      ['a', '\udce2\udc82x'],
      ['b', '\udcff\u00e9'],
    ]);
  });

  it('gives different query bytes different canonical queries (fuzz)', () => {
    const percent = (bytes: Uint8Array) =>
      [...bytes].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 8 }), fc.uint8Array({ maxLength: 8 }), (a, b) => {
        const same = Buffer.from(a).equals(Buffer.from(b));
        const fa = canonicalQuery(`v=${percent(a)}`);
        const fb = canonicalQuery(`v=${percent(b)}`);
        expect(JSON.stringify(fa) === JSON.stringify(fb)).toBe(same);
      }),
      { numRuns: 3000 },
    );
  });

  it('tells apart any two different strings, and only those, wherever they are (fuzz)', () => {
    fc.assert(
      fc.property(anyUnits, anyUnits, (a, b) => {
        for (const make of [
          (v: string): Parts => ({ ...base, path: v, body: undefined }),
          (v: string): Parts => ({ ...base, body: { [v]: v } }),
          (v: string): Parts => ({ ...base, body: Buffer.from(JSON.stringify({ memo: v })) }),
          (v: string): Parts => ({ ...base, contentType: 'text/plain', body: `x${v}` }),
        ]) {
          expect(httpFingerprint(make(a)) === httpFingerprint(make(b))).toBe(a === b);
        }
        expect(createFingerprint([a]) === createFingerprint([b])).toBe(a === b);
      }),
      { numRuns: 2000 },
    );
  });

  it('is the encoding of createFingerprint over the same parts (fuzz)', () => {
    fc.assert(
      fc.property(anyUnits, fc.dictionary(anyUnits, anyUnits, { maxKeys: 3 }), (path, body) => {
        const parts = { ...base, path, headers: { h: path }, body };
        expect(httpFingerprint(parts)).toBe(
          createFingerprint(['http/1', 'POST', path, [], [['h', path]], json, { json: body }]),
        );
      }),
      { numRuns: 1000 },
    );
  });

  it('writes a text body with a lone surrogate as the bytes of its code point (WTF-8)', () => {
    expect([...generalisedUtf8('a\ud800\ud83d\ude00\udfff')]).toEqual([
      0x61, 0xed, 0xa0, 0x80, 0xf0, 0x9f, 0x98, 0x80, 0xed, 0xbf, 0xbf,
    ]);
    expect(generalisedUtf8('caf\u00e9 \ufffd')).toEqual(Buffer.from('caf\u00e9 \ufffd', 'utf8'));
  });
});
