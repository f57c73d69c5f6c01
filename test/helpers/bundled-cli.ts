/**
 * Runs the `idempotency-kit` executable as {@link cli} does, but from one esbuild bundle of `src/cli/`
 * built once per test process, started by plain Node. tsx transpiles the CLI's module graph at every start
 * (about 1 s of CPU each, on a machine whose 2 cores the other test files share); the bundle starts in a
 * quarter of that. esbuild is the transpiler tsx itself uses, so the code run is the same source, compiled
 * the same way; only the files are joined. The package's peers (pg, redis, ioredis, better-sqlite3) stay
 * outside the bundle and are resolved from the repository's node_modules, as the source's are.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { CliRun } from './cli.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const main = join(root, 'src/cli/main.ts');
// Inside the repository, so that the bundle's imports of the peers (and `createRequire(import.meta.url)`)
// resolve to the repository's node_modules.
const outDir = join(root, 'node_modules/.cache/idempotency-kit-tests');

let bundle: Promise<string> | undefined;

/**
 * Build the bundle at most once per process. Its file is named by its content: test files in parallel
 * processes share it, a source edit gives a new one, and none is deleted under another process's feet
 * (a killed worker would leave nothing half-written either: the file is renamed into place whole).
 */
export function cliBundle(): Promise<string> {
  bundle ??= (async () => {
    const result = await build({
      entryPoints: [main],
      outfile: join(outDir, 'cli.mjs'),
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      packages: 'external',
      logLevel: 'silent',
      write: false,
    });
    const [output] = result.outputFiles;
    if (output === undefined) throw new Error('bundledCli: esbuild wrote no bundle');
    const digest = createHash('sha256').update(output.contents).digest('hex').slice(0, 16);
    const file = join(outDir, `cli-${digest}.mjs`);
    if (!existsSync(file)) {
      mkdirSync(outDir, { recursive: true });
      const partial = `${file}.${process.pid}.tmp`;
      writeFileSync(partial, output.contents);
      renameSync(partial, file);
    }
    return file;
  })();
  return bundle;
}

/**
 * Run `idempotency-kit ...args` in a child process from the bundle, with `extraEnv` added to the
 * environment: the same contract as {@link cli} (exit code, stdout, stderr; a 60 s limit), cheaper to start.
 */
export async function bundledCli(
  args: string[],
  extraEnv: Record<string, string> = {},
): Promise<CliRun> {
  const file = await cliBundle();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [file, ...args],
      { env: { ...process.env, ...extraEnv }, timeout: 60_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}
