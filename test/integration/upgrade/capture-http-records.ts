/**
 * Captures the fixture of `http-records.test.ts` from an older release: serves every case of
 * `http-cases.ts` with that release's adapters on its SQLite store, sends each case once, and writes the
 * record it stored (the row's columns, the outcome as hex) with the answer it sent.
 *
 *   git worktree add /tmp/old-release <commit>
 *   ln -s "$PWD/node_modules" /tmp/old-release/node_modules
 *   npx tsx test/integration/upgrade/capture-http-records.ts /tmp/old-release <commit> \
 *     > test/integration/upgrade/fixtures/http-records-<commit>.ts
 *   npx biome check --write test/integration/upgrade/fixtures
 *
 * Not a test: it runs the other checkout's code, which CI does not have.
 * @module
 */
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import { HTTP_CASES, type ReleaseAdapters, sendCase, serveRoutes } from './http-cases.js';

const [root, commit] = process.argv.slice(2);
if (root === undefined || commit === undefined) {
  throw new Error('usage: capture-http-records.ts <release checkout> <commit>');
}
const load = (path: string) => import(`${root}/src/${path}`);
const release = {
  express: await load('express/index.js'),
  fastify: await load('fastify/index.js'),
  hono: await load('hono/index.js'),
  fetch: await load('fetch/index.js'),
} as ReleaseAdapters;
const { createIdempotency } = await load('index.js');
const { sqliteStore } = await load('sqlite/index.js');

const database = new Database(':memory:');
const engine = createIdempotency({
  store: sqliteStore({ database, table: 'records' }),
  cache: false,
});
const routes = await serveRoutes(release, engine, (target, path) => ({ target, path, by: commit }));

interface Row {
  key: string;
  [column: string]: unknown;
}
const rows = () => database.prepare('SELECT * FROM records').all() as Row[];

const captured: Record<string, unknown> = {};
for (const c of HTTP_CASES) {
  const key = `upgrade-${createHash('sha256').update(c.name).digest('hex').slice(0, 24)}`;
  const before = new Set(rows().map((row) => row.key));
  const reply = await sendCase(routes.urls, c, key);
  const added = rows().filter((row) => !before.has(row.key));
  if (reply.status !== 201 || added.length !== 1 || added[0]?.status !== 'completed') {
    throw new Error(`${c.name}: got ${reply.status} and ${added.length} new records`);
  }
  const { outcome, ...columns } = added[0];
  captured[c.name] = {
    idempotencyKey: key,
    row: { ...columns, outcome: Buffer.from(outcome as Uint8Array).toString('hex') },
    body: reply.body,
  };
}
await routes.close();

process.stdout.write(`/**
 * Records the release at ${commit} stored for the requests of \`http-cases.ts\` (SQLite store, default namespace),
 * captured by \`capture-http-records.ts\`: the row of each, its outcome as hex, and the body it answered.
 * Generated: do not edit by hand.
 * @module
 */
import type { CapturedRecords } from './captured-records.js';

export const RELEASE = '${commit}';

export const records: CapturedRecords = ${JSON.stringify(captured, null, 2)};
`);
process.exit(0);
