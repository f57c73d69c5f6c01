/**
 * JSON bodies whose bytes are not UTF-8 in the HTTP fingerprint. Decoding such bytes writes U+FFFD for
 * each sequence that is not UTF-8, so `{"note":"\xff"}` and `{"note":"\xfe"}` (raw bytes) parsed to the
 * same value and fingerprinted alike: a key reused for the second body was replayed the first one's
 * answer. They are now compared as their bytes, kept apart from every other body (a written U+FFFD, a
 * JSON escape of a lone surrogate), while every body that is UTF-8 keeps the fingerprint it always had.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createFingerprint } from '../../../src/core/fingerprint.js';
import { httpFingerprint } from '../../../src/http/fingerprint.js';

const json = 'application/json';
const base = { method: 'POST', path: '/orders', query: '', contentType: json };

// `{"note":"<bytes>"}` with `bytes` raw inside the string.
const noteBody = (...bytes: number[]): Buffer =>
  Buffer.concat([Buffer.from('{"note":"'), Buffer.from(bytes), Buffer.from('"}')]);

describe('JSON bodies whose bytes are not UTF-8', () => {
  it('tells apart bodies that differ only in such bytes, and each from U+FFFD and from escapes', () => {
    const bodies = [
      noteBody(0xff),
      noteBody(0xfe),
      noteBody(0xff, 0xff),
      noteBody(0xc3), // a character cut short
      noteBody(0xc0, 0x80), // an overlong NUL
      noteBody(0xed, 0xa0, 0x80), // U+D800 written as UTF-8, which UTF-8 forbids
      noteBody(0xef, 0xbf, 0xbd), // U+FFFD itself (UTF-8), what decoding made of each above
      Buffer.from('{"note":"\\udcff"}'), // what \xff kept as a lone surrogate U+DC80+byte would read as
      Buffer.from('{"note":"\\ud800"}'),
    ];
    const fingerprints = bodies.map((body) => httpFingerprint({ ...base, body }));
    expect(new Set(fingerprints).size).toBe(bodies.length);
    // U+FFFD written or escaped is one value, as before.
    expect(httpFingerprint({ ...base, body: Buffer.from('{"note":"\\ufffd"}') })).toBe(
      fingerprints[6],
    );
  });

  it('gives the same bytes (a retry) the same fingerprint, in a body or in a kept rawBody', () => {
    const first = httpFingerprint({ ...base, body: noteBody(0xff) });
    expect(httpFingerprint({ ...base, body: noteBody(0xff) })).toBe(first);
    // Express with express.json({ verify: keepRawBody }): the parsed body holds U+FFFD, the bytes are kept.
    expect(httpFingerprint({ ...base, body: { note: '\ufffd' }, rawBody: noteBody(0xff) })).toBe(
      first,
    );
    expect(
      httpFingerprint({ ...base, body: { note: '\ufffd' }, rawBody: noteBody(0xfe) }),
    ).not.toBe(first);
  });

  it('compares such a body as its bytes, whatever JSON media type it has', () => {
    const body = noteBody(0x61, 0xff);
    for (const contentType of ['application/json; charset=utf-8', 'application/merge-patch+json']) {
      expect(httpFingerprint({ ...base, contentType, body })).toBe(
        createFingerprint([
          'http/1',
          'POST',
          '/orders',
          [],
          [],
          contentType.split(';')[0],
          { bytes: body },
        ]),
      );
    }
  });

  it('tells apart any two different byte strings inside a JSON string, and only those (fuzz)', () => {
    // Bytes that keep the JSON's structure (no quote, backslash or control character), often not UTF-8.
    const byte = fc.oneof(
      fc.integer({ min: 0x80, max: 0xff }),
      fc.constantFrom(0x61, 0xc3, 0xa9, 0xef, 0xbf, 0xbd, 0xed, 0xa0, 0x80),
    );
    const note = fc.array(byte, { maxLength: 6 });
    fc.assert(
      fc.property(note, note, (a, b) => {
        const same = Buffer.from(a).equals(Buffer.from(b));
        const fa = httpFingerprint({ ...base, body: noteBody(...a) });
        const fb = httpFingerprint({ ...base, body: noteBody(...b) });
        expect(fa === fb).toBe(same);
      }),
      { numRuns: 3000 },
    );
  });

  it('reads every UTF-8 body as before: the fingerprint of its parsed value (fuzz)', () => {
    // Strings of any UTF-16 code units, lone surrogates included: JSON.stringify escapes those, so the
    // bytes are always UTF-8.
    const unit = fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code));
    fc.assert(
      fc.property(fc.jsonValue({ stringUnit: unit }), (member) => {
        const bytes = Buffer.from(JSON.stringify({ member }), 'utf8');
        expect(httpFingerprint({ ...base, body: bytes })).toBe(
          httpFingerprint({ ...base, body: JSON.parse(bytes.toString('utf8')) as unknown }),
        );
      }),
      { numRuns: 1000 },
    );
  });
});
