/**
 * `transactionalRoute`: a Fastify route handler whose idempotency record commits in the handler's own
 * database transaction (see `src/http/transactional-answer.ts` for why the plugin cannot do this).
 * @module
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { replayedHeaderSet } from '../http/headers.js';
import { credentialScope } from '../http/scope.js';
import {
  answerInTransaction,
  type TransactionalAnswer,
  type TransactionalRouteOptions,
  type TransactionalRunner,
  transactionalClaim,
} from '../http/transactional-answer.js';
import { sendAnswer } from './send.js';

/** Options of {@link transactionalRoute}. */
export type FastifyTransactionalRouteOptions = TransactionalRouteOptions<FastifyRequest>;

/**
 * A Fastify handler that runs `handler` once per `Idempotency-Key` inside `transactional`'s database
 * transaction (`postgresTransactional` or `sqliteTransactional`): the claim, the handler's writes through
 * `tx` and the stored answer commit together, or not at all, with the plugin's answers (the replay with
 * `Idempotent-Replayed: true`, 400 / 409 / 422 / 503 problems). Where the plugin is registered, give the
 * route `config: { idempotency: false }`: the plugin would otherwise claim the key first, and the
 * transaction would answer `mismatch`. On SQLite the handler must be synchronous. Its own errors roll everything back and reach
 * Fastify's error handler; nothing is stored.
 * @example
 * app.post('/payments', { config: { idempotency: false } }, transactionalRoute(transactional, async (request, tx) => {
 *   const { rows } = await tx.query('INSERT INTO payments (amount) VALUES ($1) RETURNING id', [request.body.amount]);
 *   return { status: 201, body: rows[0] };
 * }));
 */
export function transactionalRoute<Tx, Req extends FastifyRequest = FastifyRequest>(
  transactional: TransactionalRunner<Tx>,
  handler: (request: Req, tx: Tx) => TransactionalAnswer | Promise<TransactionalAnswer>,
  options: FastifyTransactionalRouteOptions = {},
): (request: Req, reply: FastifyReply) => Promise<FastifyReply> {
  const allowed = replayedHeaderSet(options.replayHeaders);
  return async (request, reply) => {
    const url = request.raw.url ?? request.url;
    const q = url.indexOf('?');
    const claim = transactionalClaim(
      {
        keyHeader: request.headers['idempotency-key'],
        method: request.method,
        path: q === -1 ? url : url.slice(0, q),
        query: q === -1 ? '' : url.slice(q + 1),
        contentType: request.headers['content-type'],
        body: request.body,
      },
      options.scope?.(request) ??
        credentialScope(request.headers.authorization, request.headers.cookie),
    );
    if ('problem' in claim) return sendAnswer(request, reply, claim.problem);
    return sendAnswer(
      request,
      reply,
      await answerInTransaction(transactional, claim, (tx) => handler(request, tx), allowed),
    );
  };
}
