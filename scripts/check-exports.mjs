#!/usr/bin/env node
// Checks that package.json's exports map, the source folders and the built entries agree:
// - every subpath `./x` (or `./x/y`) has src/x/index.ts (src/x/y/index.ts; `.` has src/index.ts) and points
//   at dist/x/index.{js,d.ts};
// - every public source folder (src/<x>/index.ts, internal folders aside) has its subpath;
// - with --built, every target file exists in dist/ (and the bin too).
import { existsSync, readdirSync, readFileSync } from 'node:fs';

const INTERNAL = new Set(['core', 'store', 'http', 'consumer', 'cli']);
const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
const built = process.argv.includes('--built');
const problems = [];

const subpaths = Object.keys(pkg.exports).filter((s) => s !== './package.json');
for (const subpath of subpaths) {
  const unit = subpath === '.' ? '' : subpath.slice(2);
  const base = unit === '' ? 'dist/index' : `dist/${unit}/index`;
  const source = unit === '' ? 'src/index.ts' : `src/${unit}/index.ts`;
  const entry = pkg.exports[subpath];
  const expected = { types: `./${base}.d.ts`, import: `./${base}.js`, require: `./${base}.js` };
  for (const [condition, target] of Object.entries(expected)) {
    if (entry?.[condition] !== target) {
      problems.push(
        `exports["${subpath}"].${condition} should be ${target}, is ${entry?.[condition]}`,
      );
    }
  }
  if (Object.keys(entry ?? {})[0] !== 'types')
    problems.push(`exports["${subpath}"]: "types" must come first`);
  if (!existsSync(source)) problems.push(`exports["${subpath}"] has no source ${source}`);
  if (built) {
    for (const target of Object.values(expected)) {
      if (!existsSync(target))
        problems.push(`exports["${subpath}"] target ${target} was not built`);
    }
  }
}

// A nested subpath (`./testing/checks`) maps to its nested folder (src/testing/checks/index.ts) above; only
// the top-level folders must each have a subpath.
for (const dir of readdirSync('src', { withFileTypes: true })) {
  if (!dir.isDirectory() || INTERNAL.has(dir.name)) continue;
  if (!existsSync(`src/${dir.name}/index.ts`)) continue;
  if (!subpaths.includes(`./${dir.name}`))
    problems.push(`src/${dir.name}/index.ts has no "./${dir.name}" export`);
}

if (built && pkg.bin) {
  for (const target of Object.values(pkg.bin)) {
    if (!existsSync(target)) problems.push(`bin target ${target} was not built`);
  }
}

if (problems.length > 0) {
  console.error(`exports check failed:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log(
  `exports check: ${subpaths.length} subpaths agree with src/${built ? ' and dist/' : ''}`,
);
