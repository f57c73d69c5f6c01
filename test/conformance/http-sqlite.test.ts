/** The HTTP conformance suite on the SQLite store (a WAL file on disk), for every adapter. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sqliteStore } from '../../src/sqlite/index.js';
import { allHarnesses } from '../helpers/http-adapters.js';
import { describeHttpSuite } from './http.suite.js';

for (const harness of allHarnesses) {
  const dir = mkdtempSync(join(tmpdir(), `ik-http-${harness.name}-`));
  describeHttpSuite(harness, {
    name: 'sqlite',
    create: () => sqliteStore({ database: join(dir, 'records.db'), synchronous: 'normal' }),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  });
}
