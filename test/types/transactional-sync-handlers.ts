/**
 * Type test, checked by `tsc --noEmit -p tsconfig.json` (never run): a transactional route's handler type
 * follows its mode. On SQLite (`sqliteTransactional`, whose `synchronousHandlers: true` says so) an
 * `async` handler does not compile: it used to, and then failed every request with a 500 ("the handler
 * returned a promise"), since better-sqlite3 cannot keep a transaction open across an `await`. On
 * PostgreSQL the handler may be either. `tx` is each mode's own transaction context.
 */
import type Database from 'better-sqlite3';
import type { Request as ExpressRequest } from 'express';
import type { FastifyRequest } from 'fastify';
import { transactionalRoute as expressRoute } from '../../src/express/index.js';
import { transactionalRoute as fastifyRoute } from '../../src/fastify/index.js';
import { transactionalHandler } from '../../src/fetch/index.js';
import type { TransactionalRunner } from '../../src/http/transactional-answer.js';
import type { PgPool } from '../../src/postgres/client.js';
import { postgresTransactional, type TransactionContext } from '../../src/postgres/index.js';
import {
  type SqliteTransactional,
  type SqliteTransactionContext,
  sqliteTransactional,
} from '../../src/sqlite/index.js';

declare const database: Database.Database;
declare const pool: PgPool;
const sqlite = sqliteTransactional({ database });
const postgres = postgresTransactional({ pool });
const created = { status: 201 };

// Express, SQLite: synchronous only; `tx` is SQLite's context.
expressRoute(sqlite, (req: ExpressRequest, tx) => {
  const context: SqliteTransactionContext = tx;
  context.database.prepare('INSERT INTO orders (ref) VALUES (?)').run(req.body.ref);
  return created;
});
// @ts-expect-error an async handler on SQLite: the transaction cannot span its await
expressRoute(sqlite, async () => created);
// @ts-expect-error a promise returned without `async` is refused the same way
expressRoute(sqlite, () => Promise.resolve(created));

// Express, PostgreSQL: either; `tx` is PostgreSQL's context.
expressRoute(postgres, async (_req, tx) => {
  const context: TransactionContext = tx;
  await context.query('SELECT 1');
  return created;
});
expressRoute(postgres, () => created);
// @ts-expect-error `tx` is PostgreSQL's context, not SQLite's
expressRoute(postgres, (_req, _tx: SqliteTransactionContext) => created);

// Fastify: the same, with the route's request type inferred from the handler's annotation.
type CreateOrder = FastifyRequest<{ Body: { ref: string } }>;
fastifyRoute(sqlite, (request: CreateOrder, tx) => ({
  status: 201,
  body: { ref: request.body.ref, token: tx.token, key: tx.downstreamKey('order') },
}));
// @ts-expect-error an async handler on SQLite
fastifyRoute(sqlite, async (_request: CreateOrder) => created);
fastifyRoute(postgres, async (request: CreateOrder, tx) => {
  await tx.query('INSERT INTO orders (ref) VALUES ($1)', [request.body.ref]);
  return created;
});

// fetch: the same, with the body's type from the handler's annotation.
transactionalHandler(sqlite, (_request, tx, body: { ref: string }) => ({
  status: 201,
  body: { ref: body.ref, token: tx.token },
}));
// @ts-expect-error an async handler on SQLite
transactionalHandler(sqlite, async () => created);
transactionalHandler(postgres, async (_request, tx, body: { ref: string }) => {
  await tx.query('INSERT INTO orders (ref) VALUES ($1)', [body.ref]);
  return created;
});

// A mode that may be SQLite's (a union) takes synchronous handlers only.
declare const either: SqliteTransactional | typeof postgres;
expressRoute(either, () => created);
// @ts-expect-error an async handler where the mode may be SQLite's
expressRoute(either, async () => created);

// A runner of the app's own: asynchronous handlers unless it carries the marker.
declare const custom: TransactionalRunner<{ id: number }>;
expressRoute(custom, async (_req, tx) => ({ status: 201, body: tx.id }));
declare const customSync: TransactionalRunner<{ id: number }> & { synchronousHandlers: true };
expressRoute(customSync, (_req, tx) => ({ status: 201, body: tx.id }));
// @ts-expect-error the marker makes its handlers synchronous
expressRoute(customSync, async () => created);
