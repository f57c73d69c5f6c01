/**
 * Where the claim storm's children load the store factory from: the module the user named, as a file URL,
 * and whether it is TypeScript source (loaded through tsx).
 * @module
 */
import { existsSync } from 'node:fs';
import { extname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The factory module, resolved. */
export interface FactoryModule {
  /** Its file URL, as the children import it. */
  href: string;
  /** True when it is TypeScript source: the children need a loader (tsx). */
  typescript: boolean;
}

const TYPESCRIPT = new Set(['.ts', '.mts', '.cts']);
// The JavaScript name a TypeScript import uses for each TypeScript file (`./x.js` names `./x.ts`).
const SOURCE_OF: Record<string, string> = { '.js': '.ts', '.mjs': '.mts', '.cjs': '.cts' };

/**
 * `module` (a file URL, a `file:` string, or a path taken from the working directory) as a file URL. A
 * path goes through `pathToFileURL`, not string concatenation: a relative path, a space, `#` or `%` would
 * otherwise name another file. A `.js` name with no such file but a `.ts` beside it is the TypeScript
 * file, as in the user's own imports (and as Vitest resolves it).
 */
export function factoryModule(module: string | URL): FactoryModule {
  const url =
    module instanceof URL
      ? module
      : module.startsWith('file:')
        ? new URL(module)
        : pathToFileURL(resolve(module));
  const path = fileURLToPath(url);
  const ext = extname(path);
  if (TYPESCRIPT.has(ext)) return { href: url.href, typescript: true };
  const source = SOURCE_OF[ext];
  if (source !== undefined && !existsSync(path)) {
    const sourcePath = `${path.slice(0, -ext.length)}${source}`;
    if (existsSync(sourcePath)) return { href: pathToFileURL(sourcePath).href, typescript: true };
  }
  return { href: url.href, typescript: false };
}
