import { describe, expect, it } from 'vitest';
import { parseReadGroup } from '../../../src/redis-streams/redis-client.js';

const entries = [
  ['1-0', ['x-idempotency-key', 'a']],
  ['2-0', ['x-idempotency-key', 'b']],
];
const parsed = {
  entries: [
    {
      stream: 's',
      id: '1-0',
      fields: { 'x-idempotency-key': 'a' },
      buffers: { 'x-idempotency-key': Buffer.from('a') },
    },
    {
      stream: 's',
      id: '2-0',
      fields: { 'x-idempotency-key': 'b' },
      buffers: { 'x-idempotency-key': Buffer.from('b') },
    },
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

  it('keeps a binary value byte for byte in buffers when the reply carries Buffers', () => {
    // Arrange: what node-redis (typeMapping) and ioredis (callBuffer) return for a protobuf field.
    const body = Buffer.from([0x08, 0x96, 0x01, 0xff, 0xfe, 0x80]);
    const reply = [[Buffer.from('s'), [[Buffer.from('1-0'), [Buffer.from('body'), body]]]]];
    // Act
    const {
      entries: [entry],
    } = parseReadGroup('s', reply);
    // Assert
    expect(entry?.id).toBe('1-0');
    expect(entry?.buffers.body?.equals(body)).toBe(true);
    expect(entry?.fields.body).toBe(body.toString('utf8'));
  });

  it('keeps a field named __proto__ as a field, not as the prototype of fields', () => {
    // Act
    const {
      entries: [entry],
    } = parseReadGroup('s', [['s', [['1-0', ['__proto__', 'x', 'k', 'v']]]]]);
    // Assert
    expect(Object.getPrototypeOf(entry?.fields)).toBe(Object.prototype);
    expect(Object.keys(entry?.fields ?? {})).toEqual(['__proto__', 'k']);
    expect(Object.getOwnPropertyDescriptor(entry?.fields, '__proto__')?.value).toBe('x');
    expect(String(Object.getOwnPropertyDescriptor(entry?.buffers, '__proto__')?.value)).toBe('x');
  });

  it('returns nothing for the null reply of a read that timed out', () => {
    expect(parseReadGroup('s', null)).toEqual({ entries: [], deleted: [] });
  });
});

describe('parseReadGroup: repeated field names', () => {
  it('keeps every field in order in `pairs` only when a name repeats; `fields` has the last value', () => {
    // Act
    const { entries } = parseReadGroup('s', [
      [
        's',
        [
          ['1-0', ['k', 'a', 'item', 'x', 'item', 'y']],
          ['2-0', ['k', 'b']],
        ],
      ],
    ]);
    // Assert
    expect(entries[0]?.fields).toEqual({ k: 'a', item: 'y' });
    expect(entries[0]?.pairs?.map(([name, value]) => [name, value.toString()])).toEqual([
      ['k', 'a'],
      ['item', 'x'],
      ['item', 'y'],
    ]);
    expect(entries[1]).not.toHaveProperty('pairs');
  });
});
