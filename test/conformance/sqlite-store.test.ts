/**
 * The store conformance suite on the SQLite store: one fresh file per check, and the cross-process claim
 * storm with 4 processes sharing one file.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { sqliteStore } from '../../src/sqlite/index.js';
import { defineStoreSuite } from '../../src/testing/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-conformance-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;

defineStoreSuite({
  name: 'sqlite',
  // SQLite has no clock of its own: the processes sharing its file share one machine's clock.
  storeClock: 'process',
  createStore: () => sqliteStore({ database: join(dir, `check-${++files}.db`) }),
  disposeStore: (store) => store.close?.(),
  crossProcess: {
    module: new URL('../integration/sqlite/store-factory.ts', import.meta.url),
    argument: join(dir, 'storm.db'),
    processes: 4,
    claimsPerProcess: 2000,
    keys: 200,
  },
});
