/**
 * The HTTP API: POST /v1/payments (Idempotency-Key required) and GET /v1/payments/:id, on Express 5.
 *
 * POST checks, in this order: the key (400 `missing_key` / `invalid_key`), the JSON body (400
 * `invalid_payment`, nothing stored: a fixed body may reuse the key), then runs the one transaction that
 * claims the key, writes the payment and enqueues `payment.initiated`. Its 201 is stored with the key and
 * replayed byte for byte (`Idempotent-Replayed: true`); the same key with another body is 422.
 * @module
 */
import type { Server } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { PaymentsDatabase } from './database.js';
import {
  errorResponse,
  jsonResponse,
  keyedRequest,
  outcomeResponse,
  requiredKey,
  send,
} from './http-idempotency.js';
import { type FieldError, parsePaymentInput } from './payment.js';

/** Where the example's own problem types are explained. */
const PROBLEMS_DOC =
  'https://github.com/idempotency-kit/idempotency-kit/blob/main/docs/payments-example.md';

/** An `application/problem+json` response of the example itself (not of the idempotency layer). */
function problem(
  res: Response,
  status: number,
  code: string,
  title: string,
  extra: Record<string, unknown> = {},
): void {
  res
    .status(status)
    .type('application/problem+json')
    .set('cache-control', 'no-store')
    .send(JSON.stringify({ type: `${PROBLEMS_DOC}#${code}`, title, status, code, ...extra }));
}

function invalidPayment(res: Response, errors: FieldError[]): void {
  problem(res, 400, 'invalid_payment', 'The payment request is invalid', {
    detail: errors.map((e) => `${e.field} ${e.message}`).join('; '),
    errors,
  });
}

/** Options of {@link createApi}. */
export interface ApiOptions {
  /** The database the payments live in. */
  database: PaymentsDatabase;
  /** Called on unexpected errors (answered 500). @default console.error */
  onError?: (error: unknown) => void;
}

/**
 * Build the Express application.
 * @example
 * const app = createApi({ database });
 * app.listen(3000, '127.0.0.1');
 */
export function createApi(options: ApiOptions): express.Express {
  const { database } = options;
  const onError = options.onError ?? ((error: unknown) => console.error(error));
  const app = express();
  app.disable('x-powered-by');

  app.post(
    '/v1/payments',
    // The key first, as the idempotency layer does: a request without one is refused before its body.
    (req: Request, res: Response, next: NextFunction) => {
      const read = requiredKey(req.headers['idempotency-key']);
      if ('problem' in read) return send(res, read.problem);
      res.locals.idempotencyKey = read.key;
      next();
    },
    express.json({ limit: '16kb' }),
    async (req: Request, res: Response) => {
      const parsed = parsePaymentInput(req.body);
      if (!parsed.ok) return invalidPayment(res, parsed.errors);
      const request = keyedRequest(req, res.locals.idempotencyKey as string);
      try {
        const outcome = await database.createPayment(request, parsed.input, (payment) =>
          jsonResponse(201, payment, [['location', `/v1/payments/${payment.id}`]]),
        );
        send(res, outcomeResponse(outcome));
      } catch (error) {
        const answer = errorResponse(error);
        if (answer !== undefined) return send(res, answer);
        onError(error);
        problem(res, 500, 'internal', 'Internal error: nothing was committed, retry later');
      }
    },
  );

  app.get('/v1/payments/:id', async (req: Request, res: Response) => {
    try {
      const payment = await database.getPayment(String(req.params.id));
      if (payment === undefined) {
        return problem(res, 404, 'not_found', 'No payment with this id');
      }
      res.status(200).json(payment);
    } catch (error) {
      onError(error);
      problem(res, 503, 'unavailable', 'The database is unavailable, retry later');
    }
  });

  // Body parser failures (malformed JSON, too large) and anything else thrown before a route answered.
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const status = (error as { status?: unknown }).status;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      return invalidPayment(res, [
        { field: 'body', message: `could not be read: ${(error as Error).message}` },
      ]);
    }
    onError(error);
    problem(res, 500, 'internal', 'Internal error');
  });
  return app;
}

/**
 * Listen on `host:port`; resolves once the socket is bound.
 * @throws the listen error (e.g. EADDRINUSE).
 */
export function listen(app: express.Express, host: string, port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = app.listen(port, host, (error?: Error) => {
      if (error) reject(error);
      else resolve(server);
    });
    server.on('error', reject);
  });
}
