/**
 * Loading the library into a benchmark from a source tree: this checkout's or a `COMPARE` variant's,
 * compiled by `libraryBuilder` (or the TypeScript sources themselves, which tsx resolves from the same `.js`
 * specifiers). Every benchmark imports its modules through {@link libraryModule}; `bench/consumers.ts` and
 * `bench/redis-streams.ts` each add their consumer module to the parts they share ({@link loadCoreLibrary}).
 * @module
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

/** The parts every consumer benchmark uses: the engine, the memory store and the Redis store. */
export interface CoreLibrary {
  createIdempotency: typeof import('../../src/index.js').createIdempotency;
  memoryStore: typeof import('../../src/index.js').memoryStore;
  redisStore: typeof import('../../src/redis/index.js').redisStore;
}

/** Import the module at `path` (as under `src/`, with its `.js` extension) of the tree in `dir`. */
export function libraryModule<T>(dir: string, path: string): Promise<T> {
  return import(pathToFileURL(join(dir, path)).href) as Promise<T>;
}

/** Load the {@link CoreLibrary} parts of the tree in `dir`. */
export async function loadCoreLibrary(dir: string): Promise<CoreLibrary> {
  const [core, redisModule] = await Promise.all([
    libraryModule<typeof import('../../src/index.js')>(dir, 'index.js'),
    libraryModule<typeof import('../../src/redis/index.js')>(dir, 'redis/index.js'),
  ]);
  return {
    createIdempotency: core.createIdempotency,
    memoryStore: core.memoryStore,
    redisStore: redisModule.redisStore,
  };
}
