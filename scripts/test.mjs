#!/usr/bin/env node
// `npm test`: regenerate-check the inlined SQL/Lua, then run every Vitest project (unit, conformance,
// integration) against the local servers, and close with the plain `N passed, N failed` line CI reads.
// Extra arguments are passed to Vitest (e.g. `npm test -- test/unit`).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const gen = spawnSync(process.execPath, ['scripts/gen-sql.mjs', '--check'], { stdio: 'inherit' });
if (gen.status !== 0) process.exit(gen.status ?? 1);

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-test-'));
const report = join(dir, 'report.json');
const args = [
  'vitest',
  'run',
  '--reporter=default',
  '--reporter=json',
  `--outputFile.json=${report}`,
  ...process.argv.slice(2),
];
const run = spawnSync('npx', args, { stdio: 'inherit' });

let passed = 0;
let failed = 0;
let skipped = 0;
try {
  const result = JSON.parse(readFileSync(report, 'utf8'));
  passed = result.numPassedTests;
  failed = result.numFailedTests + (result.numTotalTestSuites === 0 ? 1 : 0);
  skipped = result.numPendingTests + result.numTodoTests;
  // A file that fails to load has no test results of its own: count it as a failure.
  for (const file of result.testResults) {
    if (file.status === 'failed' && file.assertionResults.length === 0) failed++;
  }
} catch {
  failed = Math.max(failed, 1);
}
rmSync(dir, { recursive: true, force: true });
console.log(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(run.status === 0 && failed === 0 ? 0 : 1);
