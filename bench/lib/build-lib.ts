/**
 * Compiling the library for the HTTP benchmarks: the servers load JavaScript compiled by `tsc`, as users
 * run the published `dist/`, not the TypeScript sources through tsx. Through tsx every closure the layer
 * creates per request also pays for esbuild's `keepNames` helper, which overstates the cost of closures.
 *
 * The build goes to a temporary directory (not `dist/`, which other work on the checkout may be using).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Compile the source tree `src` (no type check) under `buildDir/name` and return the directory of its
 * JavaScript, to pass as `BenchServerConfig.src`.
 */
export function buildLibrary(buildDir: string, name: string, src: string): string {
  const root = join(buildDir, name);
  mkdirSync(root, { recursive: true });
  // The compiled modules resolve their peers (express, pg…) and run as ESM, as in the package.
  symlinkSync(join(repoRoot, 'node_modules'), join(root, 'node_modules'));
  writeFileSync(join(root, 'package.json'), JSON.stringify({ type: 'module' }));
  const tsconfig = join(root, 'tsconfig.json');
  writeFileSync(
    tsconfig,
    JSON.stringify({
      extends: join(repoRoot, 'tsconfig.json'),
      // ESM whatever package.json sits next to the tree (a snapshot may have none).
      compilerOptions: {
        noEmit: false,
        module: 'ES2022',
        moduleResolution: 'Bundler',
        rootDir: src,
        outDir: join(root, 'dist'),
      },
      include: [src],
      exclude: [join(src, '**/*.test.ts')],
    }),
  );
  execFileSync(join(repoRoot, 'node_modules/.bin/tsc'), ['-p', tsconfig, '--noCheck'], {
    stdio: 'inherit',
  });
  return join(root, 'dist');
}

/** Where a benchmark loads the library from: compiled builds (the default), or the sources under `TSX=1`. */
export interface LibraryBuilder {
  /** `TSX=1`: load the TypeScript sources through tsx instead of compiling them. */
  readonly useTsx: boolean;
  /** The temporary directory the builds go to; the benchmark removes it when done. */
  readonly buildDir: string;
  /** The directory to load the tree `src` from: its build named `name`, or `src` itself under `TSX=1`. */
  build(name: string, src: string): string;
}

/** A {@link LibraryBuilder} whose builds go to a new temporary directory named after `tempPrefix`. */
export function libraryBuilder(tempPrefix: string): LibraryBuilder {
  const useTsx = process.env.TSX === '1';
  const buildDir = mkdtempSync(join(tmpdir(), tempPrefix));
  return {
    useTsx,
    buildDir,
    build(name, src) {
      if (useTsx) return src;
      try {
        return buildLibrary(buildDir, name, src);
      } catch (error) {
        // The benchmark stops here, before its own clean-up: the temporary builds would stay behind.
        rmSync(buildDir, { recursive: true, force: true });
        throw error;
      }
    },
  };
}

/** A source tree to benchmark next to the checkout's, named in `COMPARE=name=/abs/src,…`. */
export interface CompareVariant {
  name: string;
  src: string;
}

/** The variants `COMPARE` names (entries without `=` are ignored). */
export function compareVariants(value = process.env.COMPARE ?? ''): CompareVariant[] {
  return value
    .split(',')
    .filter((entry) => entry.includes('='))
    .map((entry) => {
      const [name, src] = entry.split('=') as [string, string];
      return { name, src };
    });
}
