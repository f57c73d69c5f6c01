import { describe, expect, it } from 'vitest';
import { InvalidOptionsError } from '../../../src/index.js';
import { decodeScanPosition, encodeScanPosition } from '../../../src/redis/list-crashed.js';

describe('Redis listCrashed positions', () => {
  it('starts at the first master’s start when there is no previous page', () => {
    expect(decodeScanPosition(undefined)).toEqual({ node: 0, cursor: '0' });
  });

  it.each([
    [{ node: 0, cursor: '0' }, '0:0'],
    [{ node: 2, cursor: '18446744073709551615' }, '2:18446744073709551615'],
    [{ node: 1, cursor: '96', afterKey: 'a:b:{c}' }, '1:96:a:b:{c}'],
    [{ node: 0, cursor: '7', afterKey: '' }, '0:7:'],
  ])('round-trips %j as %s', (position, text) => {
    expect(encodeScanPosition(position)).toBe(text);
    expect(decodeScanPosition(text)).toEqual(position);
  });

  it.each([
    ['3f9a'],
    [''],
    ['1'],
    ['-1:0'],
    ['01:0'],
    ['1:x'],
    ['1:012'],
    ['1:123456789012345678901'],
  ])('refuses %j, which no page gave, with InvalidOptionsError', (after) => {
    expect(() => decodeScanPosition(after)).toThrow(InvalidOptionsError);
    expect(() => decodeScanPosition(after)).toThrow(/the `next` of a previous page/);
  });
});
