/**
 * The generalised UTF-8 (WTF-8) bytes and the code-unit hex of strings with lone surrogates, as the
 * fingerprint writes them: the same, byte for byte, as before they were made linear (stored fingerprints
 * must keep matching their retries), and at a cost a client cannot blow up with many lone surrogates.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { codeUnitsHex, generalisedUtf8 } from '../../../src/core/lone-surrogates.js';
import { codeUnitsHexBefore, generalisedUtf8Before } from '../../helpers/lone-surrogates-before.js';

const char = (code: number) => String.fromCharCode(code);
// Compared as hex: a quick string comparison, and a readable difference (a deep equality walks bytes).
const hex = (bytes: Buffer) => bytes.toString('hex');

// One piece of text: a lone high or low surrogate, a pair (an astral character), or a character of 1, 2
// or 3 UTF-8 bytes, with the edges of each range and U+FFFD (what UTF-8 writes for a lone surrogate).
const piece = fc.oneof(
  fc.integer({ min: 0xd800, max: 0xdbff }).map(char),
  fc.integer({ min: 0xdc00, max: 0xdfff }).map(char),
  fc.constantFrom('\ud800', '\udbff', '\udc00', '\udfff'),
  fc.integer({ min: 0x10000, max: 0x10ffff }).map((code) => String.fromCodePoint(code)),
  fc.integer({ min: 0, max: 0x7f }).map(char),
  fc.integer({ min: 0x80, max: 0x7ff }).map(char),
  fc
    .oneof(fc.integer({ min: 0x800, max: 0xd7ff }), fc.integer({ min: 0xe000, max: 0xffff }))
    .map(char),
  fc.constantFrom('\u0000', '\u007f', '\u0080', '\u07ff', '\u0800', '\ufffd', '\uffff'),
);
// Pieces side by side, so that a high surrogate followed by a low one from the next piece pairs up.
const text = fc.array(piece, { maxLength: 40 }).map((pieces) => pieces.join(''));
// Longer runs of one piece, as a body of many lone surrogates is.
const runs = fc
  .array(fc.tuple(piece, fc.integer({ min: 1, max: 300 })), { maxLength: 6 })
  .map((parts) => parts.map(([p, count]) => p.repeat(count)).join(''));

describe('generalisedUtf8', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('writes the same bytes as before for any mix of lone surrogates, pairs and characters', () => {
    fc.assert(
      fc.property(fc.oneof(text, runs), (value) => {
        expect(hex(generalisedUtf8(value))).toBe(hex(generalisedUtf8Before(value)));
      }),
      { numRuns: 5000 },
    );
  });

  it('writes the same bytes as before for edge cases', () => {
    for (const value of [
      '',
      '\ud800',
      '\udc00',
      '\udc00\ud800', // lone low, then a high with nothing after it
      '\udc00\ud800'.repeat(3), // a low, pairs, and a high at the end
      '\ud800\ud800\udc00', // a lone high before a pair
      '\ud83d\ude00\udfff',
      'a\ud800\ud83d\ude00\udfff',
      'caf\u00e9 \ufffd',
      `${'x'.repeat(5000)}\ud800${'\u20ac'.repeat(5000)}`, // past Buffer's pool size
    ]) {
      expect(hex(generalisedUtf8(value))).toBe(hex(generalisedUtf8Before(value)));
    }
  });

  it('encodes 200,000 lone surrogates with one buffer, not two per surrogate and a concatenation', () => {
    // Lows first: a high right before a low would be a pair.
    const value = '\udfff'.repeat(100_000) + '\ud800'.repeat(100_000);
    const made = [
      vi.spyOn(Buffer, 'from'),
      vi.spyOn(Buffer, 'alloc'),
      vi.spyOn(Buffer, 'allocUnsafe'),
      vi.spyOn(Buffer, 'concat'),
    ];
    const bytes = generalisedUtf8(value);
    const calls = made.reduce((sum, spy) => sum + spy.mock.calls.length, 0);
    vi.restoreAllMocks();
    expect(calls).toBe(1);
    expect(bytes.length).toBe(600_000);
    expect([...bytes.subarray(0, 3)]).toEqual([0xed, 0xbf, 0xbf]);
    expect([...bytes.subarray(299_997, 300_003)]).toEqual([0xed, 0xbf, 0xbf, 0xed, 0xa0, 0x80]);
    expect([...bytes.subarray(599_997)]).toEqual([0xed, 0xa0, 0x80]);
  });
});

describe('codeUnitsHex', () => {
  it('writes the same hex as before for any mix of lone surrogates, pairs and characters', () => {
    fc.assert(
      fc.property(fc.oneof(text, runs), (value) => {
        expect(codeUnitsHex(value)).toBe(codeUnitsHexBefore(value));
      }),
      { numRuns: 5000 },
    );
  });

  it('writes four lower-case hex digits per code unit, a lone surrogate as it is', () => {
    expect(codeUnitsHex('')).toBe('');
    expect(codeUnitsHex('a\u0000\ud800\ud83d\ude00\uffff')).toBe('00610000d800d83dde00ffff');
    const long = '\udc00'.repeat(200_000);
    expect(codeUnitsHex(long)).toBe('dc00'.repeat(200_000));
  });
});
