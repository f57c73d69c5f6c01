/**
 * Child of the concurrent-migration test: migrates the file it is given right after the barrier, then
 * proves the schema works with one claim, and reports what it applied.
 * @module
 */
import { migrate, sqliteStore } from '../../../src/sqlite/index.js';
import { barrier, report } from './children.js';

const [file, key] = process.argv.slice(2) as [string, string];
await barrier();
try {
  const { applied } = migrate(file);
  const store = sqliteStore({ database: file, migrate: false });
  const claim = await store.claim(key, { fingerprint: 'fp', leaseMs: 60_000 });
  await store.close();
  report({ applied, claimed: claim.claimed, error: null });
} catch (error) {
  report({ applied: [], claimed: false, error: String(error) });
}
