/**
 * The dead letter's header table fits amqplib's 64 KB encoding buffer: the size bound never falls short of
 * what amqplib encodes, and the message's own headers go, largest first and named, never the adapter's.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  fitHeaders,
  MAX_HEADER_TABLE_BYTES,
  OMITTED_HEADERS_HEADER,
  tableBytes,
} from '../../../src/amqp/header-room.js';

// amqplib's own table encoder, not exported: read from its folder, beside its entry point.
const require = createRequire(import.meta.url);
const codec = require(join(dirname(require.resolve('amqplib')), 'lib', 'codec.js')) as {
  encodeTable(buffer: Buffer, table: unknown, offset: number): number;
};

/** What amqplib encodes `table` in, as it does for a publish. */
function encoded(table: Record<string, unknown>): number {
  return codec.encodeTable(Buffer.alloc(1 << 20), table, 0);
}

describe('amqp header room', () => {
  it('bounds the encoded size of every kind of value from above', () => {
    const table = {
      text: 'ünïcödé text',
      bytes: Buffer.from('raw'),
      small: 7,
      large: 2 ** 40,
      fraction: 0.5,
      yes: true,
      none: null,
      list: ['a', 1, [2, 'b']],
      nested: { inner: { deeper: 'x' } },
      stamp: { '!': 'timestamp', value: 1_700_000_000 },
      long: { '!': 'long', value: 5 },
    };
    expect(tableBytes(table)).toBeGreaterThanOrEqual(encoded(table));
  });

  it('leaves headers that fit as they are', () => {
    const headers = { a: 'x'.repeat(60_000), reason: 'handler_error' };
    expect(fitHeaders(headers, new Set(['a']))).toBe(headers);
  });

  it("leaves the message's largest headers out, named, until the table fits; never the others", () => {
    const headers = {
      big: 'b'.repeat(40_000),
      bigger: 'c'.repeat(50_000),
      small: 's',
      'x-idempotency-error': 'e'.repeat(4096),
    };
    const fitted = fitHeaders(headers, new Set(['big', 'bigger', 'small']));
    expect(fitted).toEqual({
      big: headers.big,
      small: 's',
      'x-idempotency-error': headers['x-idempotency-error'],
      [OMITTED_HEADERS_HEADER]: 'bigger',
    });
    expect(encoded(fitted)).toBeLessThanOrEqual(MAX_HEADER_TABLE_BYTES);
  });
});
