/**
 * The bytes an app kept as `rawBody` when no parser left anything in the body: read whatever the content
 * type (they were read for JSON only, and two different XML bodies kept that way fingerprinted alike).
 * A body a parser did parse keeps the fingerprint it had, kept bytes or not.
 */
import { describe, expect, it } from 'vitest';
import { httpFingerprint } from '../../../src/http/fingerprint.js';

const request = { method: 'POST', path: '/webhooks', query: '' };

describe('httpFingerprint with a kept rawBody', () => {
  it.each([
    ['undefined', undefined],
    ['null', null],
    ["''", ''],
    ['{} (Express 4)', {}],
    ['a null-prototype {} (multer)', Object.create(null) as object],
    ['empty bytes', new Uint8Array(0)],
  ])('tells two kept bodies apart when the parsed body is %s', (_name, body) => {
    const xml = { ...request, contentType: 'application/xml', body };
    const first = httpFingerprint({ ...xml, rawBody: '<refund amount="10"/>' });
    const other = httpFingerprint({ ...xml, rawBody: Buffer.from('<refund amount="99"/>') });
    expect(first).not.toBe(other);
    // The same bytes as a string or a Buffer, and as the body itself, are one request.
    expect(first).toBe(httpFingerprint({ ...xml, rawBody: Buffer.from('<refund amount="10"/>') }));
    expect(first).toBe(httpFingerprint({ ...xml, body: '<refund amount="10"/>' }));
  });

  it('keeps the fingerprint of a parsed body that is not empty (the kept bytes are not read)', () => {
    const form = { ...request, contentType: 'application/x-www-form-urlencoded' };
    const parsed = httpFingerprint({ ...form, body: { a: '1', b: '2' } });
    expect(httpFingerprint({ ...form, body: { a: '1', b: '2' }, rawBody: 'b=2&a=1' })).toBe(parsed);
    expect(httpFingerprint({ ...form, body: ['x'], rawBody: 'x' })).toBe(
      httpFingerprint({ ...form, body: ['x'] }),
    );
  });

  it('keeps the fingerprint of an empty body when nothing was kept', () => {
    const none = httpFingerprint({ ...request, body: undefined });
    expect(httpFingerprint({ ...request, body: undefined, rawBody: '' })).toBe(none);
    expect(httpFingerprint({ ...request, body: {}, rawBody: undefined })).toBe(
      httpFingerprint({ ...request, body: {} }),
    );
  });
});
