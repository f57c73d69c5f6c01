import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { httpFingerprint } from '../../../src/http/fingerprint.js';
import {
  type MultipartPart,
  multipartBoundary,
  multipartParts,
} from '../../../src/http/multipart.js';

/** A multipart body with `boundary`, as a client writes it. */
function serialize(
  parts: ReadonlyArray<readonly [ReadonlyArray<readonly [string, string]>, Uint8Array]>,
  boundary: string,
  { preamble = '', epilogue = '', padding = '' } = {},
): Buffer {
  const chunks: Buffer[] = [Buffer.from(preamble === '' ? '' : `${preamble}\r\n`, 'latin1')];
  for (const [headers, content] of parts) {
    const head = headers.map(([name, value]) => `${name}: ${value}\r\n`).join('');
    chunks.push(
      Buffer.from(`--${boundary}${padding}\r\n${head}\r\n`, 'latin1'),
      Buffer.from(content),
    );
    chunks.push(Buffer.from('\r\n', 'latin1'));
  }
  chunks.push(Buffer.from(`--${boundary}--${epilogue}`, 'latin1'));
  return Buffer.concat(chunks);
}

const request = (contentType: string, body: Uint8Array) => ({
  method: 'POST',
  path: '/uploads',
  query: '',
  contentType,
  body,
});

/** What a form's two serialisations by the platform's fetch look like: bytes and content type. */
async function serializeForm(form: FormData): Promise<{ contentType: string; body: Uint8Array }> {
  const sent = new Request('http://localhost/uploads', { method: 'POST', body: form });
  return {
    contentType: sent.headers.get('content-type') ?? '',
    body: new Uint8Array(await sent.arrayBuffer()),
  };
}

const headerName = fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,15}$/);
const headerValue = fc.stringMatching(/^[ -~]{0,40}$/);
const parts = fc.array(
  fc.tuple(
    fc.array(fc.tuple(headerName, headerValue), { maxLength: 3 }),
    fc.uint8Array({ maxLength: 64 }),
  ),
  { maxLength: 5 },
);
const boundary = fc.stringMatching(/^[0-9A-Za-z'()+_,./:=?-]{1,69}[0-9A-Za-z]$/);

describe('multipart bodies in the fingerprint', () => {
  it('reads back the parts a client wrote, whatever the boundary, preamble, epilogue and padding (fuzz)', () => {
    fc.assert(
      fc.property(parts, boundary, fc.stringMatching(/^[a-z ]{0,10}$/), (written, b, extra) => {
        const bytes = serialize(written, b, { preamble: extra, epilogue: extra, padding: ' ' });
        // The boundary must not occur in the content (RFC 2046): such a body is not well formed.
        fc.pre(!written.some(([, content]) => Buffer.from(content).includes(`--${b}`)));
        // Act
        const read = multipartParts(bytes, `multipart/form-data; boundary="${b}"`);
        // Assert
        const expected: MultipartPart[] = written.map(([headers, content]) => [
          headers
            .map(([name, value]): [string, string] => [name.toLowerCase(), value.trim()])
            .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)),
          content,
        ]);
        expect(read?.map(([h, c]) => [h, Buffer.from(c)])).toEqual(
          expected.map(([h, c]) => [h, Buffer.from(c)]),
        );
      }),
      { numRuns: 500 },
    );
  });

  it('gives one fingerprint for a form sent twice with different boundaries (fuzz)', () => {
    fc.assert(
      fc.property(parts, boundary, boundary, (written, b1, b2) => {
        fc.pre(b1 !== b2);
        fc.pre(
          !written.some(
            ([, c]) => Buffer.from(c).includes(`--${b1}`) || Buffer.from(c).includes(`--${b2}`),
          ),
        );
        const first = request(`multipart/form-data; boundary=${b1}`, serialize(written, b1));
        const retry = request(`multipart/form-data; boundary=${b2}`, serialize(written, b2));
        expect(httpFingerprint(retry)).toBe(httpFingerprint(first));
      }),
      { numRuns: 300 },
    );
  });

  it("matches a FormData retried through the platform's fetch, and tells changed forms apart", async () => {
    // Arrange
    const form = (
      file: string,
      amount: string,
      order: 'file-first' | 'amount-first' = 'file-first',
    ) => {
      const data = new FormData();
      const entries: Array<() => void> = [
        () => data.append('evidence', new Blob([file], { type: 'application/pdf' }), 'receipt.pdf'),
        () => data.append('amount', amount),
      ];
      if (order === 'amount-first') entries.reverse();
      for (const add of entries) add();
      return data;
    };
    const first = await serializeForm(form('%PDF-1.7 ...', '4200'));
    const retry = await serializeForm(form('%PDF-1.7 ...', '4200'));
    // Act
    const fingerprint = (sent: { contentType: string; body: Uint8Array }) =>
      httpFingerprint(request(sent.contentType, sent.body));
    // Assert: the platform picked two boundaries, so the bytes differ, but not the fingerprint.
    expect(first.contentType).not.toBe(retry.contentType);
    expect(Buffer.from(first.body).equals(Buffer.from(retry.body))).toBe(false);
    expect(fingerprint(retry)).toBe(fingerprint(first));
    // Another file, another field value, another order of the parts: another request.
    expect(fingerprint(await serializeForm(form('%PDF-1.7 other', '4200')))).not.toBe(
      fingerprint(first),
    );
    expect(fingerprint(await serializeForm(form('%PDF-1.7 ...', '4201')))).not.toBe(
      fingerprint(first),
    );
    expect(fingerprint(await serializeForm(form('%PDF-1.7 ...', '4200', 'amount-first')))).not.toBe(
      fingerprint(first),
    );
  });

  it('compares a body that is not well formed with its boundary as raw bytes', () => {
    // Arrange: no closing delimiter; a part without its blank line; a boundary the body does not use.
    const parts = [[[['content-disposition', 'form-data; name="a"']], Buffer.from('1')]] as const;
    const whole = serialize(parts, 'b1');
    const truncated = whole.subarray(0, whole.length - 6);
    const noBlankLine = Buffer.from('--b1\r\ncontent-disposition: form-data; name="a"\r\n--b1--');
    // Act / Assert
    expect(multipartParts(truncated, 'multipart/form-data; boundary=b1')).toBeUndefined();
    expect(multipartParts(noBlankLine, 'multipart/form-data; boundary=b1')).toBeUndefined();
    expect(multipartParts(whole, 'multipart/form-data; boundary=b2')).toBeUndefined();
    expect(multipartParts(whole, 'multipart/form-data')).toBeUndefined();
    // Compared as bytes: the same bytes match, other bytes do not.
    const asBytes = request('multipart/form-data; boundary=b1', truncated);
    expect(httpFingerprint(asBytes)).toBe(httpFingerprint({ ...asBytes }));
    expect(httpFingerprint(asBytes)).not.toBe(
      httpFingerprint(request('multipart/form-data; boundary=b1', whole)),
    );
  });

  it('reads the boundary parameter, quoted or not, in any case, within RFC 2046 length', () => {
    expect(multipartBoundary('multipart/form-data; boundary=abc')).toBe('abc');
    expect(multipartBoundary('multipart/form-data; charset=utf-8; BOUNDARY="a b:c"')).toBe('a b:c');
    expect(multipartBoundary('multipart/form-data')).toBeUndefined();
    expect(multipartBoundary('multipart/form-data; boundary=')).toBeUndefined();
    expect(multipartBoundary(`multipart/form-data; boundary=${'x'.repeat(71)}`)).toBeUndefined();
  });
});
