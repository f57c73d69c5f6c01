/**
 * A fetch handler whose step fails, for the tests of what a retry of its key gets: the handler runs its
 * steps on the request's idempotency context and, when one fails, either rethrows the failure or answers
 * a response of its own (a 5xx), the two things a handler does with it. Each test gives only its steps
 * and its failure answer; the handler around them and the POSTs of one key are the same.
 */
import { randomUUID } from 'node:crypto';
import { type IdempotencyContext, idempotencyOf, withIdempotency } from '../../src/fetch/index.js';
import type { Idempotency } from '../../src/index.js';

/** What {@link stepHandlerPost} builds its handler from. */
export interface StepHandlerOptions {
  /** The engine of the handler's `withIdempotency`. */
  engine: Idempotency;
  /** Run the handler's steps on the request's context, and answer once they succeed. */
  handle(context: IdempotencyContext): Promise<Response>;
  /** The handler's answer when `handle` throws; `'rethrow'` throws the failure out of the handler. */
  onFailure: 'rethrow' | (() => Response);
}

/**
 * A handler built from `options`, and a function that POSTs to it with the same fresh `Idempotency-Key`
 * on every call (a client's first request, then its retries).
 */
export function stepHandlerPost(options: StepHandlerOptions): () => Promise<Response> {
  const { engine, handle, onFailure } = options;
  const handler = withIdempotency(
    async (request: Request) => {
      const context = idempotencyOf(request);
      if (context === undefined) throw new Error('no idempotency context');
      try {
        return await handle(context);
      } catch (error) {
        if (onFailure === 'rethrow') throw error;
        return onFailure();
      }
    },
    { engine },
  );
  const key = randomUUID();
  return () =>
    handler(
      new Request('http://api.test/charges', {
        method: 'POST',
        headers: { 'idempotency-key': key },
      }),
    );
}
