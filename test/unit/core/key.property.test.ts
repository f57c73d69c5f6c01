import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isInvalidKeyError, MAX_KEY_LENGTH, storageKey, validateKey } from '../../../src/index.js';

const printable = fc.string({
  unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
  minLength: 1,
  maxLength: MAX_KEY_LENGTH,
});

describe('validateKey', () => {
  it('accepts every string of 1–255 printable ASCII characters', () => {
    fc.assert(
      fc.property(printable, (key) => {
        validateKey(key);
      }),
    );
  });

  it('refuses any key with a character outside printable ASCII', () => {
    const outside = fc.oneof(
      fc.integer({ min: 0, max: 0x1f }),
      fc.constant(0x7f),
      fc.integer({ min: 0x80, max: 0xffff }),
    );
    fc.assert(
      fc.property(printable, outside, fc.nat(), (key, code, at) => {
        const index = at % (key.length + 1);
        const bad = `${key.slice(0, index)}${String.fromCharCode(code)}${key.slice(index)}`.slice(
          0,
          255,
        );
        expect(() => validateKey(bad)).toThrow();
        try {
          validateKey(bad);
        } catch (error) {
          expect(isInvalidKeyError(error)).toBe(true);
        }
      }),
    );
  });

  it('refuses empty, over-long and non-string keys', () => {
    for (const key of ['', 'a'.repeat(MAX_KEY_LENGTH + 1), 42, null, undefined, ['a']]) {
      expect(() => validateKey(key)).toThrow(/Invalid idempotency key/);
    }
  });
});

describe('storageKey', () => {
  it('is 64 hex characters whatever the input', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), printable, (ns, scope, key) => {
        expect(storageKey(ns, scope, key)).toMatch(/^[0-9a-f]{64}$/);
      }),
    );
  });

  it('separates (namespace, scope, key) triples even when their concatenations agree', () => {
    fc.assert(
      fc.property(
        fc.tuple(fc.string(), fc.string(), fc.string()),
        fc.tuple(fc.string(), fc.string(), fc.string()),
        (a, b) => {
          fc.pre(a.join('\u0000') !== b.join('\u0000'));
          expect(storageKey(...a)).not.toBe(storageKey(...b));
        },
      ),
    );
    expect(storageKey('a:b', 'c', 'k')).not.toBe(storageKey('a', 'b:c', 'k'));
  });
});
