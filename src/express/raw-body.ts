/**
 * The JSON text for the fingerprint: `express.json()` parses numbers as doubles, so int64 ids that differ
 * (`9223372036854775807`, `9223372036854775806`) reach the middleware as one value, and a key reused for the
 * other id would be replayed instead of refused with 422. With the bytes kept, the fingerprint reads the
 * numbers exactly (see `src/http/json-numbers.ts`).
 * @module
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * A `verify` function for `express.json()` that keeps the bytes it parsed as `req.rawBody`, which the
 * middleware fingerprints for JSON bodies. No copy: it keeps a reference to the buffer the body parser
 * read anyway, for as long as the request lives.
 * @example
 * app.use(express.json({ verify: keepRawBody }));
 * app.use(idempotency({ store }));
 */
export function keepRawBody(
  req: IncomingMessage & { rawBody?: Buffer },
  _res: ServerResponse,
  buf: Buffer,
): void {
  req.rawBody = buf;
}
