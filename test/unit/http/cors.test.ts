import { describe, expect, it } from 'vitest';
import { exposedLayerHeaders } from '../../../src/http/cors.js';
import { replayResponse } from '../../../src/http/execution.js';
import { type HeaderValue, problemResponse } from '../../../src/http/index.js';

const replay = replayResponse({
  kind: 'response',
  status: 201,
  headers: [['content-type', 'application/json']],
  body: new Uint8Array(0),
});
const inProgress = problemResponse('in_progress', { retryAfterMs: 1500 });

/** A response's current headers, as a framework's `getHeader` reads them. */
const headers =
  (values: Record<string, HeaderValue>) =>
  (name: string): HeaderValue =>
    values[name];

describe('exposing the layer headers to browsers', () => {
  it('appends the headers the answer adds to the CORS middleware list, once each, in canonical case', () => {
    const read = headers({
      'access-control-allow-origin': 'https://app.example',
      'access-control-expose-headers': 'X-Request-Id',
    });
    expect(exposedLayerHeaders(replay, read)).toBe('X-Request-Id, Idempotent-Replayed');
    expect(exposedLayerHeaders(inProgress, read)).toBe('X-Request-Id, Link, Retry-After');
  });

  it('starts the list when the CORS middleware exposes nothing', () => {
    const origin = { 'access-control-allow-origin': '*' };
    expect(exposedLayerHeaders(replay, headers(origin))).toBe('Idempotent-Replayed');
    const blank = { ...origin, 'access-control-expose-headers': ' ' };
    expect(exposedLayerHeaders(replay, headers(blank))).toBe('Idempotent-Replayed');
  });

  it('leaves a response that is not a CORS one alone (no Access-Control-Allow-Origin)', () => {
    expect(exposedLayerHeaders(replay, headers({}))).toBeUndefined();
    expect(
      exposedLayerHeaders(replay, headers({ 'access-control-allow-origin': '' })),
    ).toBeUndefined();
  });

  it('changes nothing when the list already names them, in any case, or repeated', () => {
    const read = headers({
      'access-control-allow-origin': 'https://app.example',
      'access-control-expose-headers': ['x-request-id', 'idempotent-REPLAYED'],
    });
    expect(exposedLayerHeaders(replay, read)).toBeUndefined();
  });

  it('takes * as a wildcard only on a response that does not allow credentials', () => {
    const wildcard = { 'access-control-allow-origin': '*', 'access-control-expose-headers': '*' };
    expect(exposedLayerHeaders(replay, headers(wildcard))).toBeUndefined();
    // With credentials a browser reads `*` as a header's name (Fetch standard, CORS protocol).
    const credentialed = {
      ...wildcard,
      'access-control-allow-origin': 'https://app.example',
      'access-control-allow-credentials': 'true',
    };
    expect(exposedLayerHeaders(replay, headers(credentialed))).toBe('*, Idempotent-Replayed');
  });

  it('has nothing to add to an answer without the layer headers', () => {
    const read = headers({ 'access-control-allow-origin': '*' });
    const plain = {
      status: 201,
      headers: [['content-type', 'text/plain']] as Array<[string, string]>,
      body: new Uint8Array(0),
    };
    expect(exposedLayerHeaders(plain, read)).toBeUndefined();
  });
});
