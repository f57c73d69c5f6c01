import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalQuery, httpFingerprint } from '../../../src/http/fingerprint.js';

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
        // A body parser hands over objects and arrays (a bare string is taken as text, not JSON).
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
