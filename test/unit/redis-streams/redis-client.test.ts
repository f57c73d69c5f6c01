import { describe, expect, it } from 'vitest';
import { parseReadGroup } from '../../../src/redis-streams/redis-client.js';

const entries = [
  ['1-0', ['x-idempotency-key', 'a']],
  ['2-0', ['x-idempotency-key', 'b']],
];
const parsed = {
  entries: [
    { stream: 's', id: '1-0', fields: { 'x-idempotency-key': 'a' } },
    { stream: 's', id: '2-0', fields: { 'x-idempotency-key': 'b' } },
  ],
  deleted: [],
};

describe('parseReadGroup', () => {
  it('reads RESP2 replies: a list of [stream, entries] pairs', () => {
    expect(parseReadGroup('s', [['s', entries]])).toEqual(parsed);
  });

  it('reads RESP3 maps, as node-redis returns them', () => {
    expect(parseReadGroup('s', new Map([['s', entries]]))).toEqual(parsed);
    expect(parseReadGroup('s', { s: entries })).toEqual(parsed);
  });

  it('reads the flattened RESP3 map ioredis 6 returns from `call`: [stream, entries]', () => {
    expect(parseReadGroup('s', ['s', entries])).toEqual(parsed);
  });

  it('returns nothing for the null reply of a read that timed out', () => {
    expect(parseReadGroup('s', null)).toEqual({ entries: [], deleted: [] });
  });
});
