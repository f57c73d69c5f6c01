/**
 * `readAllowedHeaders`: the response headers kept for replay leave out those its `Connection` header names
 * (RFC 9110 §7.6.1), however that header is given (one value, a list, several lines, a number).
 */
import { describe, expect, it } from 'vitest';
import {
  type HeaderValue,
  readAllowedHeaders,
  replayedHeaderSet,
} from '../../../src/http/headers.js';

/** A response's `getHeader` over `headers` (lower-case names). */
const reader =
  (headers: Record<string, HeaderValue>) =>
  (name: string): HeaderValue =>
    headers[name];

describe('readAllowedHeaders', () => {
  const allowed = replayedHeaderSet(['x-hop', 'x-trace']);

  it('leaves out the allowed headers the Connection header names, in any case and on any line', () => {
    // Arrange
    const response = {
      'content-type': 'application/json',
      'x-hop': 'a',
      'x-trace': 'b',
      etag: '"1"',
    };
    for (const connection of ['X-Hop', ' close , x-hop ', ['keep-alive', 'x-HOP'], 'x-hop, etag']) {
      // Act
      const kept = readAllowedHeaders(allowed, reader({ ...response, connection }));
      // Assert
      const names = kept.map(([name]) => name);
      expect(names, JSON.stringify(connection)).not.toContain('x-hop');
      expect(names).toContain('x-trace');
      expect(names).toContain('content-type');
    }
  });

  it('keeps every allowed header when Connection names none of them, or is absent', () => {
    // Arrange
    const response = { 'x-hop': 'a', location: '/orders/1' };
    for (const connection of [undefined, 'keep-alive', 'close', 7]) {
      // Act
      const kept = readAllowedHeaders(allowed, reader({ ...response, connection }));
      // Assert
      expect(kept).toEqual([
        ['location', '/orders/1'],
        ['x-hop', 'a'],
      ]);
    }
  });
});
