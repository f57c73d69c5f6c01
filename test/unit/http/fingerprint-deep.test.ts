/**
 * Bodies nested deeper than the canonical encoder goes (256 levels). A body parser before the layer
 * (`express.json()`, Fastify's) hands over such a value; before the fix, the fingerprint fell back to its
 * `JSON.stringify` text, which overflows the stack some thousands of levels deep, and every such body then
 * fingerprinted as one constant: a key reused with another deep body was replayed instead of refused.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createDeepFingerprint, createFingerprint } from '../../../src/core/fingerprint.js';
import { httpFingerprint } from '../../../src/http/fingerprint.js';

const base = { method: 'POST', path: '/orders', query: '', contentType: 'application/json' };

/** `[[[…leaf…]]]`, `depth` arrays deep, as JSON text. */
const nestedText = (depth: number, leaf: string) =>
  `${'['.repeat(depth)}${leaf}${']'.repeat(depth)}`;

/** Call `fn` from `frames` nested calls deeper in the stack. */
function deeperInTheStack<T>(frames: number, fn: () => T): T {
  return frames === 0 ? fn() : deeperInTheStack(frames - 1, fn);
}

describe('the fingerprint of a body nested deeper than the encoder goes', () => {
  it('tells apart two parsed bodies 20,000 levels deep', () => {
    // Arrange
    const one = JSON.parse(nestedText(20_000, '1')) as unknown;
    const two = JSON.parse(nestedText(20_000, '2')) as unknown;
    // Act
    const fingerprints = [one, two].map((body) => httpFingerprint({ ...base, body }));
    // Assert
    expect(fingerprints[0]).not.toBe(fingerprints[1]);
  });

  it('tells apart parsed bodies that differ in depth or in a key, and never a constant', () => {
    // Arrange
    const bodies = [
      JSON.parse(nestedText(300, '1')),
      JSON.parse(nestedText(301, '1')),
      JSON.parse(`${'{"a":'.repeat(30_000)}1${'}'.repeat(30_000)}`),
      JSON.parse(`${'{"b":'.repeat(30_000)}1${'}'.repeat(30_000)}`),
      JSON.parse(`${'{"a":'.repeat(30_000)}"1"${'}'.repeat(30_000)}`),
    ] as unknown[];
    // Act
    const fingerprints = bodies.map((body) => httpFingerprint({ ...base, body }));
    // Assert
    expect(new Set(fingerprints).size).toBe(bodies.length);
  });

  it('is the same for the same body, however deep in the stack it is computed', () => {
    // Arrange
    const text = nestedText(20_000, '{"z":1,"a":[true,null,"x"]}');
    const reordered = nestedText(20_000, '{"a":[true,null,"x"],"z":1}');
    // Act
    const shallow = httpFingerprint({ ...base, body: JSON.parse(text) });
    const deep = deeperInTheStack(3_000, () =>
      httpFingerprint({ ...base, body: JSON.parse(reordered) }),
    );
    // Assert: key order does not matter, as at any depth
    expect(deep).toBe(shallow);
  });

  it('of raw bytes, is the same for the same bytes and differs for others', () => {
    // Arrange
    const one = Buffer.from(nestedText(100_000, '1'));
    const two = Buffer.from(nestedText(100_000, '2'));
    // Act
    const fingerprints = [one, Buffer.from(one), two].map((body) =>
      httpFingerprint({ ...base, body }),
    );
    // Assert
    expect(fingerprints[0]).toBe(fingerprints[1]);
    expect(fingerprints[0]).not.toBe(fingerprints[2]);
  });
});

describe('createDeepFingerprint', () => {
  it('gives what createFingerprint gives, for every value createFingerprint takes', () => {
    // Arrange
    const values: unknown[] = [
      null,
      undefined,
      true,
      -0,
      1.5,
      Number.NaN,
      'é',
      10n,
      new Uint8Array([0, 255]),
      [1, [2, [3]], undefined, new Uint8Array([7])],
      { b: 1, a: { d: undefined, c: [null] }, f: () => 1, s: Symbol('s') },
      { toJSON: () => ({ y: [1, { toJSON: () => 'z' }] }) },
      JSON.parse(nestedText(250, '{"k":[1,"2",null]}')),
    ];
    for (const value of values) {
      // Act / Assert
      expect(createDeepFingerprint(value)).toBe(createFingerprint(value));
    }
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(createDeepFingerprint(value)).toBe(createFingerprint(value));
      }),
    );
  });

  it('takes any depth, and refuses a cycle instead of looping', () => {
    // Arrange
    const cycle: Record<string, unknown> = { a: 1 };
    cycle.self = [cycle];
    // Act / Assert
    expect(createDeepFingerprint(JSON.parse(nestedText(50_000, '1')))).toMatch(/^[0-9a-f]{64}$/);
    expect(() => createDeepFingerprint(cycle)).toThrow(/cycle/);
    // A value repeated in two places is not a cycle.
    const shared = { x: 1 };
    expect(createDeepFingerprint([shared, shared])).toBe(createFingerprint([shared, shared]));
  });
});
