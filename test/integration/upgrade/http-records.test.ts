/**
 * Rolling deploy, HTTP: a request first answered by the previous release and retried on this one (the
 * load balancer sends the retry to an upgraded process) gets the stored answer byte for byte: same storage
 * key (namespace, scope digest, key), same fingerprint (canonical JSON, multipart, uploads, query,
 * headers), same outcome encoding. A fingerprint that changed would make that retry a 422, a storage key
 * that changed would run it again.
 *
 * The records are the ones the previous release stored, captured as literal rows
 * (`fixtures/http-records-<commit>.ts`, written by `capture-http-records.ts`), put into a SQLite store
 * migrated by this release; every case of `http-cases.ts` is then sent to this release's adapters.
 * Cases whose fingerprint changed on purpose (`changed`) must be refused with 422, never run.
 */
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as expressAdapter from '../../../src/express/index.js';
import * as fastifyAdapter from '../../../src/fastify/index.js';
import * as fetchAdapter from '../../../src/fetch/index.js';
import * as honoAdapter from '../../../src/hono/index.js';
import { createIdempotency } from '../../../src/index.js';
import { migrate, sqliteStore } from '../../../src/sqlite/index.js';
import { RELEASE, records } from './fixtures/http-records-e4e5dd8.js';
import { HTTP_CASES, type RunningRoutes, sendCase, serveRoutes } from './http-cases.js';

const HOUR_MS = 3_600_000;

let routes: RunningRoutes;
const runs: string[] = [];

beforeAll(async () => {
  const database = new Database(':memory:');
  migrate(database, { table: 'records' });
  const insert = database.prepare(
    `INSERT INTO records (key, status, fingerprint, token, attempt, created_at, expires_at, completed_at,
       outcome) VALUES (@key, @status, @fingerprint, @token, @attempt, @created_at, @expires_at,
       @completed_at, @outcome)`,
  );
  // The rows as the previous release wrote them; only the expiry is moved, as they were captured long ago.
  for (const { row } of Object.values(records)) {
    insert.run({
      ...row,
      reserved_until: undefined,
      steps: undefined,
      expires_at: Date.now() + HOUR_MS,
      outcome: Buffer.from(row.outcome, 'hex'),
    });
  }
  const engine = createIdempotency({
    store: sqliteStore({ database, table: 'records', migrate: false }),
    cache: false,
  });
  const release = {
    express: expressAdapter,
    fastify: fastifyAdapter,
    hono: honoAdapter,
    fetch: fetchAdapter,
  };
  routes = await serveRoutes(release, engine, (target, path) => {
    runs.push(`${target} ${path}`);
    return { target, path, by: 'this release' };
  });
});

afterAll(() => routes?.close());

describe(`a retry of a request first answered by ${RELEASE}`, () => {
  it('every case has a captured record', () => {
    expect(Object.keys(records).sort()).toEqual(HTTP_CASES.map((c) => c.name).sort());
  });

  it.each(HTTP_CASES.filter((c) => c.changed === undefined).map((c) => [c.name, c] as const))(
    '%s: is replayed the stored answer',
    async (name, c) => {
      // Arrange
      const captured = records[name]!;
      // Act
      const reply = await sendCase(routes.urls, c, captured.idempotencyKey);
      // Assert
      expect(reply).toEqual({ status: 201, replayed: 'true', body: captured.body });
    },
  );

  it.each(HTTP_CASES.filter((c) => c.changed !== undefined).map((c) => [c.name, c] as const))(
    '%s: fingerprinted differently on purpose, is refused with 422, never run',
    async (name, c) => {
      // Arrange
      const captured = records[name]!;
      const before = runs.length;
      // Act
      const reply = await sendCase(routes.urls, c, captured.idempotencyKey);
      // Assert
      expect(reply.status).toBe(422);
      expect(runs.length).toBe(before);
    },
  );

  it('no case ran its handler', () => {
    expect(runs).toEqual([]);
  });
});
