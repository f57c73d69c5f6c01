import { hash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  createIdempotency,
  isInvalidKeyError,
  MAX_KEY_LENGTH,
  memoryStore,
  storageKey,
  validateKey,
} from '../../../src/index.js';

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

  // Any UTF-16 code unit, lone surrogates and NUL included: what a namespace or scope read from
  // configuration or a token could hold.
  const anyUnits = fc.string({
    unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
  });

  it('is the SHA-256 of the JSON array [namespace, scope, key], whatever the order of the calls', () => {
    // The (namespace, scope) prefix is remembered between calls: interleaved triples must not reuse it.
    fc.assert(
      fc.property(
        fc.array(fc.tuple(anyUnits, anyUnits, printable), { maxLength: 20 }),
        (triples) => {
          for (const triple of triples) {
            expect(storageKey(...triple)).toBe(hash('sha256', JSON.stringify(triple), 'hex'));
          }
        },
      ),
    );
  });

  it('keeps apart parts that UTF-8 encoding alone would merge or a separator would confuse', () => {
    // Unescaped, two different lone surrogates both encode as U+FFFD (EF BF BD) and would collide.
    const parts = [
      '\ud800',
      '\udfff',
      '\ufffd',
      '',
      '\u0000',
      'a\u0000',
      '"',
      '\\',
      '","',
      'caf\u00e9',
      'cafe\u0301',
    ];
    const keys = new Set<string>();
    for (const namespace of parts)
      for (const scope of parts) keys.add(storageKey(namespace, scope, 'k'));
    expect(keys.size).toBe(parts.length * parts.length);
    const long = 'n'.repeat(1_000_000);
    expect(storageKey(long, '', 'k')).not.toBe(storageKey(`${long}n`, '', 'k'));
  });

  it('gives a numeric scope its own records, apart from the same digits as a string', () => {
    const idempotency = createIdempotency({ store: memoryStore() });
    expect(idempotency.storageKeyFor('k', 1 as unknown as string)).not.toBe(
      idempotency.storageKeyFor('k', '1'),
    );
    expect(
      createIdempotency({ store: memoryStore(), namespace: 'a' }).storageKeyFor('k', 'b:c'),
    ).not.toBe(
      createIdempotency({ store: memoryStore(), namespace: 'a:b' }).storageKeyFor('k', 'c'),
    );
  });
});
