/**
 * Every response the HTTP layer produces itself: RFC 9457 `application/problem+json` bodies whose `type`
 * links to the code's section of `docs/reference/errors.md`, with the status the IETF draft assigns.
 * @module
 */
import { ERRORS_DOC_URL, type ErrorCode } from '../core/errors.js';

/** A response the layer sends itself (a problem or a replay), framework-neutral. */
export interface HttpResponseData {
  /** HTTP status. */
  status: number;
  /** Headers, one pair per value. */
  headers: Array<[string, string]>;
  /** Body bytes. */
  body: Uint8Array;
}

/**
 * Codes only a problem response carries, which no error class throws: a request the layer refuses before
 * anything reaches the engine.
 */
type ProblemOnlyCode = 'request_too_large';

/** Status of each problem the layer answers with. */
export const PROBLEM_STATUS = {
  invalid_key: 400,
  missing_key: 400,
  in_progress: 409,
  response_too_large: 409,
  response_not_captured: 409,
  request_too_large: 413,
  key_mismatch: 422,
  store_unavailable: 503,
  replayed_error: 500,
} as const satisfies Partial<Record<ErrorCode | ProblemOnlyCode, number>>;

/** A code the layer can answer with. */
export type ProblemCode = keyof typeof PROBLEM_STATUS;

// Titles are one per problem type (RFC 9457), so they name no header: a route may read its key from a
// header of its own (`headerName`), which the detail names.
const TITLES: Record<ProblemCode, string> = {
  invalid_key: 'Invalid idempotency key',
  missing_key: 'Idempotency key required',
  in_progress: 'A request with this Idempotency-Key is still being processed',
  response_too_large: 'The response to this Idempotency-Key was too large to keep',
  response_not_captured: 'The response to this Idempotency-Key was sent but could not be kept',
  request_too_large: 'The request body is too large to check against its Idempotency-Key',
  key_mismatch: 'Idempotency-Key reused with a different request',
  store_unavailable: 'Idempotency store unavailable',
  replayed_error: 'The request with this Idempotency-Key failed, and its failure is final',
};

/** Options of {@link problemResponse}. */
export interface ProblemOptions {
  /** Human-readable explanation of this occurrence. */
  detail?: string;
  /** Sets `Retry-After`, rounded up to whole seconds (at least 1). */
  retryAfterMs?: number;
}

/** The problem document's URI for `code`. */
export function problemType(code: ProblemCode): string {
  return `${ERRORS_DOC_URL}#${code}`;
}

/**
 * Build a problem response for `code`.
 * @example
 * problemResponse('in_progress', { retryAfterMs: 2500 }); // 409, Retry-After: 3
 */
export function problemResponse(code: ProblemCode, options: ProblemOptions = {}): HttpResponseData {
  const status = PROBLEM_STATUS[code];
  const document = {
    type: problemType(code),
    title: TITLES[code],
    status,
    code,
    ...(options.detail === undefined ? {} : { detail: options.detail }),
  };
  const headers: Array<[string, string]> = [
    ['content-type', 'application/problem+json'],
    ['cache-control', 'no-store'],
    ['link', `<${ERRORS_DOC_URL}>; rel="describedby"`],
  ];
  if (options.retryAfterMs !== undefined) {
    headers.push(['retry-after', String(Math.max(1, Math.ceil(options.retryAfterMs / 1000)))]);
  }
  return { status, headers, body: Buffer.from(JSON.stringify(document), 'utf8') };
}
