/**
 * `npm run bench`: runs the embedded benchmarks (core, sqlite) one after another; name others to run them
 * too, e.g. `npm run bench -- redis postgres http consumers` (those need the local servers).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const names = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['core', 'sqlite'];
let failed = 0;
for (const name of names) {
  const file = `bench/${name}.ts`;
  if (!existsSync(file)) {
    console.error(`no benchmark ${file}`);
    failed++;
    continue;
  }
  const result = spawnSync('npx', ['tsx', file], { stdio: 'inherit' });
  if (result.status !== 0) failed++;
}
process.exit(failed > 0 ? 1 : 0);
