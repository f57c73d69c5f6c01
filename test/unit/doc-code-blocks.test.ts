/**
 * Every ```ts block of the docs listed below is type-checked as it is written, under the project's
 * `strict` settings, against the package's own exports (`idempotency-kit`, `idempotency-kit/sqlite`, …
 * resolved to `src/`). A block is a fragment of a program: what it uses without defining (`store`, `app`,
 * `pool`) is declared by its prelude here, typed as the docs describe it, and a block that `return`s is
 * wrapped in a function; a module of the reader's own that a block imports is in MODULES. The blocks are
 * read from the docs at test time, never copied, so an edit that breaks one fails here. A new block of
 * these pages fails the inventory check until it is listed.
 *
 * Blocks this caught: observability.md's Prometheus example used an `app` it never created, and its
 * consumer-hooks example was an object property, not a statement; http.md's raw-body example used one
 * `app` as both an Express and a Fastify app; postgres.md's transactional examples read `rows[0].id`,
 * possibly undefined under `noUncheckedIndexedAccess`, and so did express.md's; concepts.md's engine
 * example `return`ed at the top level of a module that has imports; express.md's first example used an
 * `app` it never created.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** One doc block and what it needs around it to compile. */
interface Block {
  /** The doc, relative to the repository root. */
  doc: string;
  /** Text found in this one ```ts block of the doc and in no other (blocks are added around it). */
  contains: string;
  /** Declarations of what the block uses without defining it. */
  prelude?: string;
  /** Wrap the block in an async function (it `return`s). */
  wrap?: boolean;
}

const STORE = `import type { Store } from 'idempotency-kit';\ndeclare const store: Store;`;

const BLOCKS: Block[] = [
  {
    doc: 'README.md',
    contains: 'idempotency.run({ key: idempotencyKey',
    prelude: `declare const idempotencyKey: string, userId: string;
declare const body: { amount: number };
declare const payments: {
  charge(body: unknown, options: { idempotencyKey: string; signal: AbortSignal }): Promise<{ id: string }>;
};`,
  },
  {
    doc: 'docs/concepts.md',
    contains: 'chargeCard(body',
    prelude: `declare const tenantId: string;
declare const body: { amount: number };
declare function chargeCard(
  body: unknown,
  options: { idempotencyKey: string; signal: AbortSignal },
): Promise<{ id: string }>;`,
  },
  {
    doc: 'docs/concepts.md',
    contains: "ctx.step('charge'",
    prelude: `import { createIdempotency, memoryStore } from 'idempotency-kit';
const idempotency = createIdempotency({ store: memoryStore() });
declare const key: string, scope: string;
declare const order: { amount: number };
declare const provider: {
  charge(amount: number, options: { idempotencyKey: string }): Promise<{ id: string }>;
};
declare const carrier: { book(order: unknown, chargeId: string): Promise<{ tracking: string }> };`,
  },
  {
    doc: 'docs/concepts.md',
    contains: 'idempotency.inspect(',
    prelude: `import { createIdempotency, memoryStore } from 'idempotency-kit';
const store = memoryStore();
const idempotency = createIdempotency({ store });
declare const scope: string;`,
  },
  { doc: 'docs/concepts.md', contains: 'listCrashedKeys(store', prelude: STORE },
  {
    doc: 'docs/http.md',
    contains: 'verify: keepRawBody',
    prelude: `import express from 'express';
import fastify from 'fastify';
import { keepRawBody } from 'idempotency-kit/express';
import { idempotencyPlugin } from 'idempotency-kit/fastify';
${STORE}
const expressApp = express();
const fastifyApp = fastify();`,
  },
  {
    doc: 'docs/http.md',
    contains: 'scope: (req) => req.user.tenantId',
    prelude: `import { idempotency } from 'idempotency-kit/express';
${STORE}
declare global {
  namespace Express {
    interface Request {
      user: { id: string; tenantId: string };
    }
  }
}`,
  },
  {
    doc: 'docs/http.md',
    contains: "scopeCookies: ['sid']",
    prelude: `import { idempotency } from 'idempotency-kit/express';\n${STORE}`,
  },
  {
    doc: 'docs/http.md',
    contains: "scopeHeaders: ['X-API-Key']",
    prelude: `import { idempotency } from 'idempotency-kit/express';\n${STORE}`,
  },
  {
    doc: 'docs/http.md',
    contains: 'req.hostname',
    prelude: `import { idempotency } from 'idempotency-kit/express';
${STORE}
declare global {
  namespace Express {
    interface Request {
      user: { id: string; tenantId: string };
    }
  }
}`,
  },
  {
    doc: 'docs/http.md',
    contains: "fingerprintHeaders: ['host']",
    prelude: `import { idempotency } from 'idempotency-kit/express';\n${STORE}`,
  },
  {
    doc: 'docs/observability.md',
    contains: 'onLeaseLost: (event) => logger',
    prelude: `${STORE}\ndeclare const logger: { warn(fields: object, message: string): void };`,
  },
  { doc: 'docs/observability.md', contains: 'register.metrics()', prelude: STORE },
  {
    doc: 'docs/observability.md',
    contains: 'withStoreMetrics(redisStore',
    prelude: `import { idempotency } from 'idempotency-kit/express';
import { prometheusHooks } from 'idempotency-kit/prometheus';
import { redisStore } from 'idempotency-kit/redis';
import type { createClient } from 'redis';
declare const client: ReturnType<typeof createClient>;`,
  },
  {
    doc: 'docs/observability.md',
    contains: 'hooks: prometheusConsumerHooks(),',
    prelude: `import type { ConfirmChannel } from 'amqplib';
${STORE}
declare const channel: ConfirmChannel;
declare function ship(message: unknown): Promise<void>;`,
  },
  {
    doc: 'docs/observability.md',
    contains: 'onDeadLetter: (event) => alert',
    prelude: `import type { ConfirmChannel } from 'amqplib';
${STORE}
declare const channel: ConfirmChannel;
declare function ship(message: unknown): Promise<void>;
declare function alert(messageId: unknown, error: string): void;`,
  },
  {
    doc: 'docs/observability.md',
    contains: 'hooks: openTelemetryHooks() })',
    prelude: `import { idempotency } from 'idempotency-kit/express';\n${STORE}`,
  },
  {
    doc: 'docs/observability.md',
    contains: 'checkStoreHealth(store, { timeout',
    prelude: `import express from 'express';\n${STORE}\nconst app = express();`,
  },
  {
    doc: 'docs/outbox.md',
    contains: 'relay.start();',
    prelude: `import type { ConfirmChannel } from 'amqplib';
import type pg from 'pg';
declare const pool: pg.Pool;
declare const tx: pg.PoolClient;
declare const channel: ConfirmChannel;
declare const paymentId: string, amount: number;`,
  },
  {
    doc: 'docs/outbox.md',
    contains: 'logger.warn(result.warning)',
    prelude: `import { migrateOutbox } from 'idempotency-kit/outbox';
import type pg from 'pg';
declare const pool: pg.Pool;
declare const logger: { warn(message: string): void };`,
  },
  {
    doc: 'docs/outbox.md',
    contains: "channel.on('close'",
    prelude: `import type { ChannelModel } from 'amqplib';
import { amqpPublisher } from 'idempotency-kit/outbox';
declare const connection: ChannelModel;`,
  },
  { doc: 'docs/stores/memory.md', contains: 'memoryStore()' },
  { doc: 'docs/stores/sqlite.md', contains: "sqliteStore({ database: './idempotency.db' })" },
  { doc: 'docs/stores/sqlite.md', contains: 'migrate(db);' },
  {
    doc: 'docs/stores/sqlite.md',
    contains: 'purgeExpired({ limit: 1000 })) === 1000',
    prelude: `import { sqliteStore } from 'idempotency-kit/sqlite';
const store = sqliteStore({ database: ':memory:' });`,
  },
  {
    doc: 'docs/stores/sqlite.md',
    contains: 'sqliteTransactional({ database: db })',
    prelude: `declare const key: string;\ndeclare const body: { amount: number };`,
  },
  { doc: 'docs/stores/redis.md', contains: "redisStore({ client, prefix: 'orders:' })" },
  {
    doc: 'docs/stores/redis.md',
    contains: 'waitForReplicas: { count: 1',
    prelude: `import type { RedisClientLike } from 'idempotency-kit/redis';\ndeclare const client: RedisClientLike;`,
  },
  {
    doc: 'docs/stores/redis.md',
    contains: 'onReplicationShort: (event) =>',
    prelude: `${STORE}\ndeclare const logger: { warn(fields: object, message: string): void };`,
  },
  {
    doc: 'docs/stores/postgres.md',
    contains: "pool.on('error'",
    prelude: `declare const log: { warn(error: unknown): void };`,
  },
  {
    doc: 'docs/stores/postgres.md',
    contains: 'sql.unsafe(',
    prelude: `import { postgresStore } from 'idempotency-kit/postgres';
// postgres.js's \`sql\`: unsafe() resolves to the rows, an array with a \`count\`.
declare const sql: {
  unsafe(text: string, values: never[]): Promise<Record<string, unknown>[] & { count: number }>;
};`,
  },
  {
    doc: 'docs/stores/postgres.md',
    contains: "migrate(pool, { schema: 'billing'",
    prelude: `import { migrate } from 'idempotency-kit/postgres';
import type pg from 'pg';
declare const pool: pg.Pool;`,
  },
  {
    doc: 'docs/stores/postgres.md',
    contains: "lockTimeoutMs: '5s'",
    prelude: `import { migrate } from 'idempotency-kit/postgres';
import type pg from 'pg';
declare const pool: pg.Pool;`,
  },
  {
    doc: 'docs/stores/postgres.md',
    contains: 'logger.warn(result.warning)',
    prelude: `import { migrate } from 'idempotency-kit/postgres';
import type pg from 'pg';
declare const pool: pg.Pool;
declare const logger: { warn(message: string): void };`,
  },
  {
    doc: 'docs/stores/postgres.md',
    contains: "postgresTransactional({ pool, namespace: 'shop' })",
    wrap: true,
    prelude: `import { postgresTransactional } from 'idempotency-kit/postgres';
import type pg from 'pg';
declare const pool: pg.Pool;
declare const idempotencyKey: string, tenantId: string;
declare const body: { customer: string; total: number; sku: string };
declare function reply(status: number, body?: unknown): unknown;`,
  },
  {
    doc: 'docs/stores/postgres.md',
    contains: 'transactionalRoute(transactional, async (req, tx)',
    prelude: `import express from 'express';
import { transactionalRoute } from 'idempotency-kit/express';
import { enqueue } from 'idempotency-kit/outbox';
import { postgresTransactional } from 'idempotency-kit/postgres';
import type pg from 'pg';
declare const pool: pg.Pool;
const app = express();
const transactional = postgresTransactional({ pool });`,
  },
  {
    doc: 'docs/stores/postgres.md',
    contains: 'const deleted = await store.purgeExpired',
    prelude: `import { postgresStore } from 'idempotency-kit/postgres';
import type pg from 'pg';
declare const pool: pg.Pool;
const store = postgresStore({ pool });`,
  },
  // The reader's own store (`./my-store.js`) is MODULES' test/my-store.ts.
  { doc: 'docs/guides/writing-a-store.md', contains: 'defineStoreSuite({' },
  { doc: 'docs/guides/writing-a-store.md', contains: 'storeConformanceChecks({' },
  {
    doc: 'docs/adapters/express.md',
    contains: 'redisStore({ client, timeoutMs: 500 })',
    prelude: `import type { RequestHandler } from 'express';
import type { createClient } from 'redis';
declare const client: ReturnType<typeof createClient>;
declare const authenticate: RequestHandler;
declare function createOrder(body: unknown, options: { paymentKey?: string }): Promise<{ id: string }>;`,
  },
  {
    doc: 'docs/adapters/express.md',
    contains: "app.post('/disputes/:id/evidence'",
    prelude: `import express, { type RequestHandler } from 'express';
import { idempotency } from 'idempotency-kit/express';
import multer from 'multer';
${STORE}
const app = express();
const idem = idempotency({ store });
declare const submitEvidence: RequestHandler, upload: RequestHandler;`,
  },
  {
    doc: 'docs/adapters/express.md',
    contains: 'express.json({ verify: keepRawBody }), transactionalRoute(',
    prelude: `import express from 'express';
import type pg from 'pg';
declare const pool: pg.Pool;
const app = express();`,
  },
  {
    doc: 'docs/adapters/express.md',
    contains: 'route.requireKey, express.json(), validPayment, route',
    prelude: `import express, { type Request, type RequestHandler } from 'express';
import { transactionalRoute } from 'idempotency-kit/express';
import { postgresTransactional, type TransactionContext } from 'idempotency-kit/postgres';
import type { TransactionalAnswer } from 'idempotency-kit/express';
import type pg from 'pg';
declare const pool: pg.Pool;
const app = express();
const transactional = postgresTransactional({ pool });
declare function createPayment(req: Request, tx: TransactionContext): Promise<TransactionalAnswer>;
declare const validPayment: RequestHandler;`,
  },
  {
    doc: 'docs/adapters/fastify.md',
    contains: 'await app.register(idempotencyPlugin, { store: postgresStore({ pool })',
    prelude: `import type pg from 'pg';
declare const pool: pg.Pool;
declare function createOrder(body: unknown, options: { paymentKey?: string }): Promise<{ id: string }>;`,
  },
  {
    doc: 'docs/adapters/fastify.md',
    contains: 'transactionalRoute(transactional, async (request: CreatePayment, tx)',
    prelude: `import fastify, { type FastifyRequest } from 'fastify';
import { transactionalRoute } from 'idempotency-kit/fastify';
import { postgresTransactional } from 'idempotency-kit/postgres';
import type pg from 'pg';
declare const pool: pg.Pool;
const app = fastify();
const transactional = postgresTransactional({ pool });`,
  },
  {
    doc: 'docs/adapters/fastify.md',
    contains: 'await app.register(multipart);',
    prelude: `import multipart, { type MultipartFile } from '@fastify/multipart';
import fastify, { type RouteHandlerMethod } from 'fastify';
import { idempotencyPlugin } from 'idempotency-kit/fastify';
${STORE}
const app = fastify();
declare function submitEvidence(file: MultipartFile | undefined): Promise<{ id: string }>;
declare const upload: RouteHandlerMethod;`,
  },
  {
    doc: 'docs/adapters/fetch.md',
    contains: 'withIdempotency(async (request) =>',
    prelude: `declare const charges: {
  create(body: unknown, options: { idempotencyKey?: string }): Promise<{ id: string }>;
};`,
  },
  {
    doc: 'docs/adapters/fetch.md',
    contains: 'transactionalHandler(transactional,',
    prelude: `import { transactionalHandler } from 'idempotency-kit/fetch';
import { postgresTransactional } from 'idempotency-kit/postgres';
import type pg from 'pg';
declare const pool: pg.Pool;
const transactional = postgresTransactional({ pool });`,
  },
  {
    doc: 'docs/adapters/hono.md',
    contains: "idem.route({ key: 'required' }), async (c)",
    prelude: `import type { MiddlewareHandler } from 'hono';
declare const authenticate: MiddlewareHandler;
declare function createOrder(body: unknown, options: { paymentKey?: string }): Promise<{ id: string }>;`,
  },
];

/** Modules the blocks import from the reader's own project, as in-memory files under test/. */
const MODULES: Record<string, string> = {
  'test/my-store.ts': `import type { Store } from 'idempotency-kit';
export declare function myStore(options: { url?: string | undefined; prefix: string }): Store;`,
};

const PAGES = [
  'README.md',
  'docs/concepts.md',
  'docs/http.md',
  'docs/observability.md',
  'docs/outbox.md',
  'docs/stores/memory.md',
  'docs/stores/sqlite.md',
  'docs/stores/redis.md',
  'docs/stores/postgres.md',
  'docs/guides/writing-a-store.md',
  'docs/adapters/express.md',
  'docs/adapters/fastify.md',
  'docs/adapters/fetch.md',
  'docs/adapters/hono.md',
  // No ```ts blocks (shell sessions and their output): listed so that one added later is checked.
  'docs/cli.md',
  'docs/payments-example.md',
];

const read = (path: string) => readFileSync(join(root, path), 'utf8');

// Every ```ts block of a doc, with its position.
function blocksOf(doc: string): Array<{ start: number; code: string }> {
  return [...read(doc).matchAll(/^[ \t]*```ts\n([\s\S]*?)^[ \t]*```/gm)].map((match) => ({
    start: match.index,
    code: match[1] ?? '',
  }));
}

// The one block of `doc` that contains `text`.
function blockWith(doc: string, text: string): { start: number; code: string } {
  const found = blocksOf(doc).filter((b) => b.code.includes(text));
  expect(found.length, `${doc}: blocks containing "${text}"`).toBe(1);
  return found[0]!;
}

// A program of in-memory files under test/, with the package's subpaths resolved to src/.
function diagnosticsOf(files: Map<string, string>): string[] {
  const config = ts.readConfigFile(join(root, 'tsconfig.json'), ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  const options: ts.CompilerOptions = {
    ...parsed.options,
    noEmit: true,
    noUnusedLocals: false,
    paths: {
      'idempotency-kit': [join(root, 'src/index.ts')],
      'idempotency-kit/testing/checks': [join(root, 'src/testing/checks/index.ts')],
      'idempotency-kit/*': [join(root, 'src/*/index.ts')],
    },
  };
  const host = ts.createCompilerHost(options);
  const readFile = host.readFile.bind(host);
  const getSourceFile = host.getSourceFile.bind(host);
  host.fileExists = (name) => files.has(name) || ts.sys.fileExists(name);
  host.readFile = (name) => files.get(name) ?? readFile(name);
  host.getSourceFile = (name, language, ...rest) => {
    const text = files.get(name);
    return text === undefined
      ? getSourceFile(name, language, ...rest)
      : ts.createSourceFile(name, text, language, true);
  };
  const program = ts.createProgram([...files.keys()], options, host);
  return ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file !== undefined && files.has(d.file.fileName))
    .map((d) => {
      const { line } = d.file!.getLineAndCharacterOfPosition(d.start ?? 0);
      const source = d.file!.text.split('\n')[line]?.trim();
      return `${d.file!.fileName.slice(root.length + 1)}:${line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}\n    ${source}`;
    });
}

describe('doc code blocks', () => {
  it('lists every ```ts block of the pages', () => {
    // Arrange
    const listed = new Set(BLOCKS.map((b) => `${b.doc}@${blockWith(b.doc, b.contains).start}`));
    // Act
    const unlisted = PAGES.flatMap((doc) =>
      blocksOf(doc)
        .filter((b) => !listed.has(`${doc}@${b.start}`))
        .map((b) => `${doc}: ${b.code.split('\n')[0]}`),
    );
    // Assert
    expect(unlisted).toEqual([]);
  });

  it('type-checks every listed block under strict against the package exports', () => {
    // Arrange: each block in a module of its own, after its prelude
    const files = new Map<string, string>(
      Object.entries(MODULES).map(([path, text]) => [join(root, path), text]),
    );
    BLOCKS.forEach((b, i) => {
      const { code } = blockWith(b.doc, b.contains);
      const body = b.wrap ? `async function snippet() {\n${code}}\n` : code;
      const name = join(root, 'test', `doc-block-${i}-${b.doc.replace(/[/.]/g, '-')}.ts`);
      files.set(name, `${b.prelude ?? ''}\n${body}\nexport {};\n`);
    });
    // Act
    const diagnostics = diagnosticsOf(files);
    // Assert
    expect(diagnostics).toEqual([]);
    // One TypeScript program over src/ and the peers' types: ~12 s here, 40 s on a loaded machine.
  }, 120_000);
});
