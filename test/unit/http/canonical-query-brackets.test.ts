/**
 * The canonical query of bracketed parameters (`ids`, `ids[]`, `ids[x]`), which a `qs`-style parser builds
 * into one value in the order they came. A query whose parameters of each base are in name order sorts by
 * name as it always did (same fingerprint as before); one whose are not keeps their order, and is never
 * read as a query that sorts by name.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalQuery } from '../../../src/http/fingerprint.js';

const byName = (params: Array<[string, string]>) =>
  [...params].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

// The parameters of each base in their order: what a qs-style parser makes of the query, modulo the order
// of its top-level keys.
function byBase(params: ReadonlyArray<[string, string]>): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [name, value] of params) {
    const bracket = name.indexOf('[');
    const base = bracket === -1 ? name : name.slice(0, bracket);
    out[base] ??= [];
    out[base].push(`${name}=${value}`);
  }
  return out;
}

const param = fc.tuple(
  fc.constantFrom('a', 'a[]', 'a[0]', 'a[x]', 'a[y]', 'ab', 'a-b', 'b', 'b[]'),
  fc.constantFrom('1', '2'),
);
const query = (params: ReadonlyArray<[string, string]>) =>
  params.map(([name, value]) => `${name}=${value}`).join('&');

describe('canonicalQuery with bracketed names', () => {
  it('keeps the order of one base whose parameters are out of name order', () => {
    // Arrange / Act / Assert
    expect(canonicalQuery('ids=1&ids[]=2')).toEqual([
      ['ids', '1'],
      ['ids[]', '2'],
    ]);
    expect(canonicalQuery('ids[]=2&ids=1')).toEqual([
      ['ids[]', '2'],
      ['ids', '1'],
    ]);
    expect(canonicalQuery('z=0&ids[]=2&b=3&ids=1')).toEqual([
      ['b', '3'],
      ['ids[]', '2'],
      ['ids', '1'],
      ['z', '0'],
    ]);
  });

  it('sorts by name when every base is in name order, as before (fingerprints unchanged)', () => {
    fc.assert(
      fc.property(fc.array(param, { maxLength: 8 }), (params) => {
        // Arrange: each base's parameters in name order, the bases in any order
        const sorted = byName(params);
        const bases = Object.values(byBase(sorted));
        const shuffled = bases.flatMap((_, i) => bases[(i + params.length) % bases.length] ?? []);
        const raw = shuffled.join('&');
        // Act / Assert
        expect(canonicalQuery(raw)).toEqual(byName(canonicalQuery(raw)));
        expect(canonicalQuery(raw)).toEqual(sorted);
      }),
    );
  });

  it('two queries read alike exactly when each base has the same parameters in the same order', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.tuple(fc.array(param, { maxLength: 6 }), fc.array(param, { maxLength: 6 })),
          // The same parameters in another order: the case sorting by name made alike.
          fc.array(param, { maxLength: 6 }).chain((params) =>
            fc.tuple(
              fc.constant(params),
              fc.shuffledSubarray(params, {
                minLength: params.length,
                maxLength: params.length,
              }),
            ),
          ),
        ),
        ([first, second]) => {
          // Act
          const alike =
            JSON.stringify(canonicalQuery(query(first))) ===
            JSON.stringify(canonicalQuery(query(second)));
          // Assert: the same per base as a qs-style parser sees it (bases compared in name order)
          const sameValues =
            JSON.stringify(Object.entries(byBase(first)).sort()) ===
            JSON.stringify(Object.entries(byBase(second)).sort());
          expect(alike).toBe(sameValues);
        },
      ),
      { numRuns: 2000 },
    );
  });
});
