/**
 * The internal HTTP module shared by every adapter (`express`, `fastify`, `fetch`, `hono`): every policy
 * decision lives here, adapters only translate. Not a public subpath.
 * @module
 */
export type { BodyCollector } from './capture.js';
export { createBodyCollector } from './capture.js';
export type { IdempotencyContext } from './context.js';
export { currentIdempotency, runWithContext } from './context.js';
export { exposedLayerHeaders } from './cors.js';
export type { CapturedResponse, Decision, Execution, RequestFacts } from './execution.js';
export { conflictResponse, decide, replayResponse } from './execution.js';
export type { FingerprintParts } from './fingerprint.js';
export { canonicalQuery, httpFingerprint, isJsonContentType } from './fingerprint.js';
export type { HeaderValue } from './headers.js';
export {
  DEFAULT_REPLAYED_HEADERS,
  keepContentEncoding,
  pickHeaders,
  REPLAYED_HEADER,
  readAllowedHeaders,
  replayedHeaderSet,
} from './headers.js';
export type { KeyHeaderResult } from './key-header.js';
export { parseKeyHeader, parseKeyValue } from './key-header.js';
export type { EngineSource, HttpRouteOptions, RoutePolicy } from './options.js';
export {
  DEFAULT_MAX_BODY_BYTES,
  KeyMode,
  policyCovers,
  resolveEngine,
  resolvePolicy,
  routeOptionsOf,
} from './options.js';
export type { HttpResponseData, ProblemCode, ProblemOptions } from './problem.js';
export { PROBLEM_STATUS, problemResponse, problemType } from './problem.js';
export type { HttpOutcome, StoredResponse, TooLargeMarker } from './response-codec.js';
export { httpResponseCodec } from './response-codec.js';
export { credentialScope } from './scope.js';
export type {
  TransactionalAnswer,
  TransactionalClaim,
  TransactionalRunner,
} from './transactional-answer.js';
export {
  requiredKey,
  transactionalErrorResponse,
  transactionalOutcomeResponse,
} from './transactional-answer.js';
export type { WebCaptureResult } from './web.js';
export { captureWebResponse, toWebResponse } from './web.js';
