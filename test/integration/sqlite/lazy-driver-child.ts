/**
 * Child of the lazy-driver test: hides better-sqlite3 from `require`, loads `idempotency-kit/sqlite`,
 * then asks the store to open a file, and prints what happened as JSON.
 * @module
 */
import Module, { createRequire } from 'node:module';

type Resolve = (request: string, ...rest: unknown[]) => string;
const loader = Module as unknown as { _resolveFilename: Resolve };
const resolve = loader._resolveFilename;
loader._resolveFilename = function (this: unknown, request: string, ...rest: unknown[]) {
  if (request === 'better-sqlite3') {
    throw Object.assign(new Error("Cannot find module 'better-sqlite3'"), {
      code: 'MODULE_NOT_FOUND',
    });
  }
  return resolve.call(this, request, ...rest);
};

const { sqliteStore } = await import('../../../src/sqlite/index.js');
const loaded = Object.keys(createRequire(import.meta.url).cache).some((p) =>
  p.includes('better-sqlite3'),
);
let error: { name: string; code: string; message: string } | undefined;
try {
  sqliteStore({ database: ':memory:' });
} catch (e) {
  const { name, code, message } = e as { name: string; code: string; message: string };
  error = { name, code, message };
}
console.log(JSON.stringify({ imported: true, loaded, error }));
