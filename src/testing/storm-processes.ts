/**
 * Starting the processes of a cross-process storm (the claim storm, the takeover storm): one worker module
 * of this folder per process, each given the store factory to load and its own settings through an
 * environment variable, and a deadline past which the storm gives up.
 * @module
 */
import { type ChildProcess, fork } from 'node:child_process';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CrossProcessOptions } from './claim-storm.js';
import { factoryModule } from './factory-module.js';

// `.ts` when the kit runs from source (its tests), `.js` once built: the workers sit beside this module.
const EXT = extname(fileURLToPath(import.meta.url));

/** What every storm worker is told: where its store comes from, and its seed. */
export interface StormWorkerBase {
  module: string;
  exportName: string;
  argument: unknown;
  seed: number;
}

/**
 * Fork `options.processes` (default 4) copies of the worker `./<worker>` of this folder, each given
 * `settings(base, index)` as JSON in the environment variable `variable`. A TypeScript factory (or the
 * kit run from source) is loaded through tsx, unless `options.execArgv` says otherwise.
 */
export function forkStormWorkers<C>(
  options: CrossProcessOptions,
  worker: string,
  variable: string,
  settings: (base: StormWorkerBase, index: number) => C,
): ChildProcess[] {
  const factory = factoryModule(options.module);
  const file = fileURLToPath(new URL(`./${worker}${EXT}`, import.meta.url));
  const execArgv =
    options.execArgv ?? (EXT === '.ts' || factory.typescript ? ['--import', 'tsx'] : []);
  return Array.from({ length: options.processes ?? 4 }, (_, index) => {
    const base: StormWorkerBase = {
      module: factory.href,
      exportName: options.exportName ?? 'createStore',
      argument: options.argument,
      seed: index + 1,
    };
    return fork(file, [], {
      execArgv,
      env: { ...process.env, [variable]: JSON.stringify(settings(base, index)) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
  });
}

/**
 * A promise that rejects once `timeoutMs` has passed (the storm named `storm` gave up), never an
 * unhandled rejection by itself, and what clears its timer.
 */
export function stormDeadline(
  storm: string,
  timeoutMs: number,
): { deadline: Promise<never>; clear: () => void } {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(
            `the ${storm} did not finish within ${timeoutMs} ms (a store that never connects, ` +
              'or a call that never returns); its processes were killed',
          ),
        ),
      timeoutMs,
    );
  });
  deadline.catch(() => {});
  return { deadline, clear: () => clearTimeout(timer) };
}
