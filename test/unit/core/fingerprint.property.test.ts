import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createFingerprint } from '../../../src/index.js';

/** The same JSON value with every object's keys in a shuffled order. */
function shuffleKeys(value: unknown, seed: number): unknown {
  if (Array.isArray(value)) return value.map((v, i) => shuffleKeys(v, seed + i));
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value);
  entries.sort(
    (a, b) =>
      ((a[0].length * 31 + seed) % 7) - ((b[0].length * 31 + seed) % 7) || (seed % 2 ? 1 : -1),
  );
  return Object.fromEntries(entries.map(([k, v], i) => [k, shuffleKeys(v, seed + i)]));
}

describe('createFingerprint', () => {
  it('does not depend on object key order', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.nat(), (value, seed) => {
        expect(createFingerprint(shuffleKeys(value, seed))).toBe(createFingerprint(value));
      }),
    );
  });

  it('gives the same fingerprint after a JSON round trip', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(createFingerprint(JSON.parse(JSON.stringify(value)))).toBe(createFingerprint(value));
      }),
    );
  });

  it('tells different JSON values apart', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (a, b) => {
        const sameJson = isDeepStrictEqual(
          JSON.parse(JSON.stringify(a)),
          JSON.parse(JSON.stringify(b)),
        );
        fc.pre(!sameJson);
        expect(createFingerprint(a)).not.toBe(createFingerprint(b));
      }),
    );
  });

  it('hashes bytes raw and tells them apart from the same text', () => {
    fc.assert(
      fc.property(fc.uint8Array(), fc.uint8Array(), (a, b) => {
        const same = Buffer.from(a).equals(Buffer.from(b));
        expect(createFingerprint(a) === createFingerprint(b)).toBe(same);
      }),
    );
    expect(createFingerprint(Buffer.from('abc'))).not.toBe(createFingerprint('abc'));
  });

  it('keeps nested structure apart ([["a"]] vs ["a"], {"a":"b"} vs ["a","b"])', () => {
    expect(createFingerprint([['a']])).not.toBe(createFingerprint(['a']));
    expect(createFingerprint({ a: 'b' })).not.toBe(createFingerprint(['a', 'b']));
    expect(createFingerprint({ a: undefined, b: 1 })).toBe(createFingerprint({ b: 1 }));
    expect(createFingerprint('1')).not.toBe(createFingerprint(1));
  });
});
