import { describe, expect, it } from 'vitest';
import { ERRORS_DOC_URL } from '../../../src/core/errors.js';
import { replayResponse } from '../../../src/http/execution.js';
import { resolvePolicy } from '../../../src/http/options.js';
import { problemResponse } from '../../../src/http/problem.js';
import { type HttpOutcome, httpResponseCodec } from '../../../src/http/response-codec.js';

describe('HTTP response codec', () => {
  it('round-trips status, headers and binary body byte-exact', () => {
    // Arrange
    const body = Uint8Array.from({ length: 256 }, (_, i) => i);
    const outcome: HttpOutcome = {
      kind: 'response',
      status: 201,
      headers: [
        ['content-type', 'application/octet-stream'],
        ['etag', '"x"'],
      ],
      body,
    };
    // Act
    const decoded = httpResponseCodec.decode(httpResponseCodec.encode(outcome));
    // Assert
    expect(decoded).toEqual(outcome);
  });

  it('round-trips the too-large marker and replays it as a 409 problem, never as the handler', () => {
    // Arrange
    const marker: HttpOutcome = { kind: 'too_large', status: 200, bytes: 2_000_000 };
    // Act
    const decoded = httpResponseCodec.decode(httpResponseCodec.encode(marker)) as HttpOutcome;
    const replay = replayResponse(decoded);
    // Assert
    expect(decoded).toEqual(marker);
    expect(replay.status).toBe(409);
    expect(JSON.parse(Buffer.from(replay.body).toString()).code).toBe('response_too_large');
  });

  it('round-trips the not-captured marker and replays it as a 409 problem, never as the handler', () => {
    // Arrange
    const marker: HttpOutcome = { kind: 'not_captured', status: 201 };
    // Act
    const decoded = httpResponseCodec.decode(httpResponseCodec.encode(marker)) as HttpOutcome;
    const replay = replayResponse(decoded);
    // Assert
    expect(decoded).toEqual(marker);
    expect(replay.status).toBe(409);
    expect(JSON.parse(Buffer.from(replay.body).toString()).code).toBe('response_not_captured');
  });
});

describe('problem responses', () => {
  it.each([
    ['invalid_key', 400],
    ['missing_key', 400],
    ['in_progress', 409],
    ['response_too_large', 409],
    ['response_not_captured', 409],
    ['request_too_large', 413],
    ['key_mismatch', 422],
    ['store_unavailable', 503],
    ['replayed_error', 500],
  ] as const)('maps %s to %i with a type into errors.md', (code, status) => {
    // Act
    const response = problemResponse(code);
    const document = JSON.parse(Buffer.from(response.body).toString());
    // Assert
    expect(response.status).toBe(status);
    expect(response.headers).toContainEqual(['content-type', 'application/problem+json']);
    expect(document).toMatchObject({ type: `${ERRORS_DOC_URL}#${code}`, status, code });
  });

  it('rounds Retry-After up to whole seconds, at least 1', () => {
    // Act / Assert
    expect(problemResponse('in_progress', { retryAfterMs: 1 }).headers).toContainEqual([
      'retry-after',
      '1',
    ]);
    expect(problemResponse('in_progress', { retryAfterMs: 2001 }).headers).toContainEqual([
      'retry-after',
      '3',
    ]);
  });
});

describe('route policy', () => {
  it('defaults to POST and PATCH, an optional key and 1 MiB', () => {
    // Act
    const policy = resolvePolicy({});
    // Assert
    expect([...policy.methods]).toEqual(['POST', 'PATCH']);
    expect(policy.key).toBe('optional');
    expect(policy.maxBodyBytes).toBe(1024 * 1024);
    expect([...policy.replayHeaders]).toEqual([
      'content-type',
      'location',
      'cache-control',
      'etag',
    ]);
  });

  it('lets a route override the defaults', () => {
    // Act
    const policy = resolvePolicy({ key: 'optional', maxBodyBytes: 10 }, { key: 'required' });
    // Assert
    expect(policy.key).toBe('required');
    expect(policy.maxBodyBytes).toBe(10);
  });

  it.each([
    'Set-Cookie',
    'authorization',
    'transfer-encoding',
    'connection',
    'Access-Control-Allow-Origin',
    'access-control-expose-headers',
    'Proxy-Status',
    'proxy-agent',
    // Kept exactly when the stored body is encoded, never by configuration.
    'Content-Encoding',
  ])('refuses to replay %s whatever the options say', (header) => {
    // Act / Assert
    expect(() => resolvePolicy({ replayHeaders: [header] })).toThrow(
      expect.objectContaining({ code: 'invalid_options' }),
    );
  });

  it.each([
    ['failOpen', 'false'],
    ['storeServerErrors', 1],
    ['asyncContext', 'yes'],
  ])(
    'refuses %s as anything but a boolean (a string "false" from a config file is truthy)',
    (name, value) => {
      // Act / Assert
      expect(() => resolvePolicy({ [name]: value } as never)).toThrow(
        expect.objectContaining({
          code: 'invalid_options',
          message: expect.stringContaining(name),
        }),
      );
      expect(() => resolvePolicy({}, { [name]: value } as never)).toThrow(
        expect.objectContaining({ code: 'invalid_options' }),
      );
    },
  );

  it.each([
    ['methods', 'POST'],
    ['methods', ['POST', 'GET /x']],
    ['replayHeaders', ['bad header']],
    ['replayHeaders', 'x-custom'],
    ['fingerprintHeaders', ['x-api-version', '']],
  ])('refuses %s %j with an InvalidOptionsError, not a TypeError later', (name, value) => {
    // Act / Assert
    expect(() => resolvePolicy({ [name]: value } as never)).toThrow(
      expect.objectContaining({ code: 'invalid_options', message: expect.stringContaining(name) }),
    );
  });

  it('refuses an unknown key mode and a negative size', () => {
    // Act / Assert
    expect(() => resolvePolicy({ key: 'sometimes' as 'required' })).toThrow(/key/);
    expect(() => resolvePolicy({ maxBodyBytes: -1 })).toThrow(/maxBodyBytes/);
  });

  it('accepts keys of 1 character by default, and refuses a minKeyLength outside 1–255', () => {
    expect(resolvePolicy({}).minKeyLength).toBe(1);
    expect(resolvePolicy({ minKeyLength: 10 }, { minKeyLength: 36 }).minKeyLength).toBe(36);
    for (const bad of [0, 256, 1.5, Number.NaN]) {
      expect(() => resolvePolicy({ minKeyLength: bad }), String(bad)).toThrow(
        expect.objectContaining({
          code: 'invalid_options',
          message: expect.stringMatching(/minKeyLength/),
        }),
      );
    }
  });
});
