/**
 * The HTTP API: POST /v1/payments (Idempotency-Key required) and GET /v1/payments/:id, on Express 5.
 *
 * POST checks, in this order: the key (400 `missing_key` / `invalid_key`, the route's `requireKey`), the
 * JSON body (400 `invalid_payment`, nothing stored: a fixed body may reuse the key), then runs
 * `paymentRoute`, the one transaction that claims the key, writes the payment and enqueues
 * `payment.initiated`. Its 201 is stored with the key and replayed byte for byte
 * (`Idempotent-Replayed: true`); the same key with another body is 422.
 * @module
 */
import type { Server } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { PaymentsDatabase } from './database.js';
import { type FieldError, parsePaymentInput } from './payment.js';
import { paymentRoute } from './payment-route.js';

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

/** 400 `invalid_payment` for a body that is not a payment: refused before the key is claimed. */
function validPayment(req: Request, res: Response, next: NextFunction): void {
  const parsed = parsePaymentInput(req.body);
  if (parsed.ok) next();
  else invalidPayment(res, parsed.errors);
}

// A body parser's failure (malformed JSON, too large) carries a 4xx `status`.
function isClientError(error: unknown): boolean {
  const status = (error as { status?: unknown } | null)?.status;
  return typeof status === 'number' && status >= 400 && status < 500;
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

  const createPayment = paymentRoute(database);
  app.post(
    '/v1/payments',
    // The key first, as the idempotency layer orders its checks: refused before the body is read.
    createPayment.requireKey,
    express.json({ limit: '16kb' }),
    validPayment,
    createPayment,
    // What the route passes on was thrown inside its transaction, after which everything rolled back.
    (error: unknown, _req: Request, res: Response, next: NextFunction) => {
      if (isClientError(error)) return next(error); // the body parser's: answered below
      onError(error);
      problem(res, 500, 'internal', 'Internal error: nothing was committed, retry later');
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
    if (isClientError(error)) {
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
