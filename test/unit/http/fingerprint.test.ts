import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createDeepFingerprint, createFingerprint } from '../../../src/core/fingerprint.js';
import { canonicalQuery, httpFingerprint } from '../../../src/http/fingerprint.js';
import { parseJsonExactly } from '../../../src/http/json-numbers.js';
import { multipartParts } from '../../../src/http/multipart.js';
import { exactValue, jsonNumberLexeme, nearMiss } from '../../helpers/json-lexemes.js';

const base = { method: 'POST', path: '/orders', query: '', contentType: 'application/json' };

// Shuffle the keys of every object in a JSON value, recursively.
function reorder(value: unknown, seed: number): unknown {
  if (Array.isArray(value)) return value.map((v) => reorder(v, seed));
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value);
    const rotated = entries
      .slice(seed % Math.max(entries.length, 1))
      .concat(entries.slice(0, seed % Math.max(entries.length, 1)));
    return Object.fromEntries(rotated.reverse().map(([k, v]) => [k, reorder(v, seed)]));
  }
  return value;
}

describe('HTTP fingerprint', () => {
  it('ignores JSON key order, whether the body is raw bytes or already parsed', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.nat(), (value, seed) => {
        // Arrange
        const bytes = Buffer.from(JSON.stringify(value) ?? 'null');
        const shuffled = Buffer.from(JSON.stringify(reorder(value, seed)) ?? 'null');
        // Act
        const a = httpFingerprint({ ...base, body: bytes });
        const b = httpFingerprint({ ...base, body: shuffled });
        // Assert
        expect(a).toBe(b);
        // A body parser hands over objects and arrays (a bare string is taken as text, not JSON). Doubles
        // written in their shortest form, as JSON.stringify writes them, fingerprint as the parsed value.
        if (typeof value === 'object' && value !== null) {
          expect(httpFingerprint({ ...base, body: reorder(value, seed) })).toBe(a);
        }
      }),
    );
  });

  it('tells apart bodies that differ in content', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (x, y) => {
        // Arrange
        fc.pre(JSON.stringify(reorder(x, 0)) !== JSON.stringify(reorder(y, 0)));
        // Act / Assert
        expect(httpFingerprint({ ...base, body: Buffer.from(JSON.stringify(x)) })).not.toBe(
          httpFingerprint({ ...base, body: Buffer.from(JSON.stringify(y)) }),
        );
      }),
    );
  });

  it('compares non-JSON bodies as raw bytes', () => {
    // Arrange
    const octets = { ...base, contentType: 'application/octet-stream' };
    // Act / Assert
    expect(httpFingerprint({ ...octets, body: Buffer.from('{"a":1,"b":2}') })).not.toBe(
      httpFingerprint({ ...octets, body: Buffer.from('{"b":2,"a":1}') }),
    );
  });

  it('tells apart JSON bodies whose numbers parse to the same double (int64 ids)', () => {
    // Arrange: 2^63 - 1 and 2^63 - 2 are one double, as are 1e400 and 2e400 (Infinity), 1e-400 and 0
    const account = (id: string) => Buffer.from(`{"account":${id},"amount":100}`);
    const fingerprint = (id: string) => httpFingerprint({ ...base, body: account(id) });
    // Act / Assert
    expect(fingerprint('9223372036854775807')).not.toBe(fingerprint('9223372036854775806'));
    expect(fingerprint('1e400')).not.toBe(fingerprint('2e400'));
    expect(fingerprint('0.30000000000000004')).not.toBe(fingerprint('0.3'));
    expect(fingerprint('0.30000000000000004')).not.toBe(fingerprint('0.300000000000000041'));
    // Long numbers whose double has a short form: the text, not the double, shows them.
    expect(fingerprint('0.10000000000000001')).not.toBe(fingerprint('0.1'));
    expect(fingerprint('12345678.100000001')).not.toBe(fingerprint('12345678.1'));
    expect(fingerprint('1e-400')).not.toBe(fingerprint('0'));
    // A double written in its shortest form (as JSON.stringify writes it) keeps the fingerprint it had.
    expect(fingerprint('0.30000000000000004')).toBe(
      httpFingerprint({ ...base, body: { account: 0.1 + 0.2, amount: 100 } }),
    );
    // The same number however written, and in any key order.
    expect(fingerprint('9223372036854775807')).toBe(fingerprint('9.223372036854775807e18'));
    expect(
      httpFingerprint({
        ...base,
        body: Buffer.from('{ "amount": 100, "account": 9223372036854775807 }'),
      }),
    ).toBe(fingerprint('9223372036854775807'));
  });

  it('tells apart any two different numbers, and only those, however close and however written (fuzz)', () => {
    const fingerprint = (n: string) =>
      httpFingerprint({ ...base, body: Buffer.from(`{"id":"order 1","n":${n}}`) });
    fc.assert(
      fc.property(
        jsonNumberLexeme,
        jsonNumberLexeme,
        fc.integer({ min: 0, max: 9 }),
        (a, other, digit) => {
          // Arrange: an unrelated number, the near miss of `a`, and `a` written another way
          const rewritten = a.replace(
            /^(-?)(\d+)(\.\d+)?/,
            (_m, sign: string, whole: string, f = '.') => `${sign}${whole}${f}000`,
          );
          for (const b of [other, nearMiss(a, digit), rewritten]) {
            // Act / Assert
            expect(fingerprint(a) === fingerprint(b), `${a} vs ${b}`).toBe(
              exactValue(a) === exactValue(b),
            );
          }
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('prefers the raw JSON text the app kept to the parsed body (numbers exact), for JSON only', () => {
    // Arrange: the parsed body has rounded both ids to one double
    const raw = (id: string) => `{"account":${id}}`;
    const rounded = JSON.parse(raw('9223372036854775807')) as unknown;
    const withRaw = (id: string, contentType = 'application/json') =>
      httpFingerprint({ ...base, contentType, body: rounded, rawBody: Buffer.from(raw(id)) });
    // Act / Assert
    expect(withRaw('9223372036854775807')).not.toBe(withRaw('9223372036854775806'));
    expect(withRaw('9223372036854775807')).toBe(
      httpFingerprint({ ...base, body: raw('9223372036854775807') }),
    );
    // Short numbers: the same fingerprint with or without the raw text.
    expect(httpFingerprint({ ...base, body: { a: 1 }, rawBody: '{ "a": 1 }' })).toBe(
      httpFingerprint({ ...base, body: { a: 1 } }),
    );
    // Not JSON (a form the app parsed): the parsed body, as before.
    const form = { ...base, contentType: 'application/x-www-form-urlencoded', body: { a: '1' } };
    expect(httpFingerprint({ ...form, rawBody: 'a=1' })).toBe(httpFingerprint(form));
  });

  it('tells big integers apart by value and ignores key order around them (fuzz)', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }),
        fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }),
        fc.jsonValue(),
        (a, b, other) => {
          // Arrange
          const body = (id: bigint, reversed: boolean) => {
            const members = [`"id":${id}`, `"other":${JSON.stringify(other) ?? 'null'}`];
            return Buffer.from(`{${(reversed ? members.reverse() : members).join(',')}}`);
          };
          // Act
          const fingerprintA = httpFingerprint({ ...base, body: body(a, false) });
          // Assert
          expect(httpFingerprint({ ...base, body: body(a, true) })).toBe(fingerprintA);
          expect(httpFingerprint({ ...base, body: body(b, true) }) === fingerprintA).toBe(a === b);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('covers the method, the path, the query and the selected headers', () => {
    // Arrange
    const body = Buffer.from('{"a":1}');
    const reference = httpFingerprint({ ...base, body });
    // Act / Assert
    expect(httpFingerprint({ ...base, method: 'PATCH', body })).not.toBe(reference);
    expect(httpFingerprint({ ...base, path: '/orders/2', body })).not.toBe(reference);
    expect(httpFingerprint({ ...base, query: 'x=1', body })).not.toBe(reference);
    expect(httpFingerprint({ ...base, headers: { 'api-version': '2' }, body })).not.toBe(reference);
    expect(httpFingerprint({ ...base, query: '?b=2&a=1', body })).toBe(
      httpFingerprint({ ...base, query: 'a=1&b=2', body }),
    );
  });

  it('sorts the query by name but keeps the order of repeated parameters', () => {
    // Arrange / Act / Assert
    expect(canonicalQuery('?b=1&a=2&b=0')).toEqual([
      ['a', '2'],
      ['b', '1'],
      ['b', '0'],
    ]);
  });

  it('never throws, whatever the bytes, content type or parsed value (fuzz)', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.uint8Array({ maxLength: 512 }), fc.string(), fc.anything()),
        fc.constantFrom(
          undefined,
          'application/json',
          'text/plain',
          'application/x+json; charset=utf-8',
          'multipart/form-data; boundary=b',
        ),
        fc.string(),
        (body, contentType, query) => {
          // Act
          const fingerprint = httpFingerprint({
            method: 'POST',
            path: '/x',
            query,
            contentType,
            body,
          });
          // Assert
          expect(fingerprint).toMatch(/^[0-9a-f]{64}$/);
          expect(httpFingerprint({ method: 'POST', path: '/x', query, contentType, body })).toBe(
            fingerprint,
          );
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('survives a JSON body nested deeper than the canonical encoder allows', () => {
    // Arrange
    const deep = Buffer.from(`${'['.repeat(5000)}${']'.repeat(5000)}`);
    // Act / Assert
    expect(httpFingerprint({ ...base, body: deep })).toMatch(/^[0-9a-f]{64}$/);
  });
});

// The fingerprint as first specified: core `createFingerprint` over the request's parts. The HTTP layer
// writes the same encoding directly (faster); any difference would turn every stored key into a mismatch.
function referenceFingerprint(parts: {
  method: string;
  path: string;
  query: string;
  contentType?: string | undefined;
  headers?: Record<string, string | undefined>;
  body: unknown;
}): string {
  const media = parts.contentType?.split(';')[0]?.trim().toLowerCase() ?? '';
  const headers = Object.entries(parts.headers ?? {})
    .filter((entry): entry is [string, string] => entry[1] !== undefined)
    .map(([name, value]) => [name.toLowerCase(), value] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const isJson = media === 'application/json' || media.endsWith('+json');
  const base = ['http/1', parts.method.toUpperCase(), parts.path, canonicalQuery(parts.query)];
  try {
    let body: unknown;
    if (parts.body === undefined || parts.body === null) body = null;
    else if (parts.body instanceof Uint8Array || typeof parts.body === 'string') {
      const bytes = typeof parts.body === 'string' ? Buffer.from(parts.body, 'utf8') : parts.body;
      body = { bytes };
      if (bytes.byteLength === 0) body = null;
      else if (isJson) {
        const text = Buffer.from(bytes).toString('utf8');
        let valid = true;
        try {
          JSON.parse(text);
        } catch {
          valid = false; // compared as bytes
        }
        // Numbers by their exact value where a double would round them (the Encoder, only then, reads the
        // text a second time; any other JSON reads the same either way).
        if (valid) body = { json: parseJsonExactly(text) };
      } else if (media.startsWith('multipart/')) {
        const multipart = multipartParts(bytes, parts.contentType ?? '');
        if (multipart !== undefined) body = { multipart };
      }
    } else body = { json: parts.body };
    return createFingerprint([...base, headers, media, body]);
  } catch {
    // Past the depth limit: the same encoding without it (createDeepFingerprint, which gives what
    // createFingerprint gives wherever that one goes), JSON text as its bytes.
    const raw = parts.body;
    const body =
      raw instanceof Uint8Array || typeof raw === 'string'
        ? { bytes: typeof raw === 'string' ? Buffer.from(raw, 'utf8') : raw }
        : { json: raw };
    try {
      return createDeepFingerprint([...base, headers, media, body]);
    } catch {
      return createFingerprint([...base, headers, media, { text: '<unserialisable body>' }]);
    }
  }
}

describe('HTTP fingerprint encoding', () => {
  const parsedValue = fc.oneof(
    fc.jsonValue(),
    fc.object({
      values: [
        fc.jsonValue(),
        fc.constant(undefined),
        fc.bigInt(),
        fc.double(),
        fc.date({ noInvalidDate: true }),
        fc.uint8Array({ maxLength: 16 }),
      ],
    }),
    fc.array(fc.oneof(fc.double(), fc.constant(undefined), fc.uint8Array({ maxLength: 8 }))),
  );
  const body = fc.oneof(
    parsedValue,
    parsedValue.map((v) =>
      Buffer.from(JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? 1 : x)) ?? ''),
    ),
    // JSON as non-JavaScript clients write it: numbers longer or farther than a double holds.
    fc
      .array(jsonNumberLexeme, { maxLength: 4 })
      .map((numbers) => Buffer.from(`{"n":[${numbers.join(',')}],"s":"x"}`)),
    fc.uint8Array({ maxLength: 64 }),
    fc.string({ unit: 'binary', maxLength: 32 }),
    fc.constantFrom(undefined, null, '', () => 1, Symbol('s')),
    // A well-formed multipart body with the boundary `b` (its content has no '-', so no delimiter).
    fc
      .array(fc.uint8Array({ maxLength: 16 }), { maxLength: 3 })
      .map((contents) =>
        Buffer.concat([
          ...contents.flatMap((content, i) => [
            Buffer.from(`--b\r\ncontent-disposition: form-data; name="f${i}"\r\n\r\n`),
            Buffer.from(content.filter((byte) => byte !== 0x2d)),
            Buffer.from('\r\n'),
          ]),
          Buffer.from('--b--'),
        ]),
      ),
  );

  it('is byte for byte the reference encoding, for any request (fuzz)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('POST', 'patch', 'Put'),
        fc.string({ unit: 'binary', maxLength: 16 }),
        fc.oneof(fc.constant(''), fc.string({ maxLength: 24 })),
        fc.option(
          fc.dictionary(fc.string({ maxLength: 8 }), fc.option(fc.string(), { nil: undefined })),
        ),
        fc.constantFrom(
          undefined,
          'application/json',
          'text/plain',
          'application/x+json; charset=utf-8',
          'multipart/form-data; boundary=b',
        ),
        body,
        (method, path, query, headers, contentType, value) => {
          // Arrange
          const parts = {
            method,
            path,
            query,
            contentType,
            headers: headers ?? undefined,
            body: value,
          };
          // Act / Assert
          expect(httpFingerprint(parts)).toBe(referenceFingerprint(parts));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('is the reference encoding for bodies nested to the edge of the depth limit and past it', () => {
    for (const depth of [250, 253, 254, 255, 256, 257, 300]) {
      // Arrange
      let nested: unknown = { leaf: 1 };
      for (let i = 0; i < depth; i++) nested = i % 2 === 0 ? [nested] : { k: nested };
      const parts = { method: 'POST', path: '/x', query: '', body: nested };
      // Act / Assert
      expect(httpFingerprint(parts)).toBe(referenceFingerprint(parts));
    }
  });
});
