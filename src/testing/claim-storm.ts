/**
 * The cross-process claim storm: several OS processes, each with its own store instance, claim the same keys
 * at the same moment; exactly one claim per key may win.
 * @module
 */
import { fork } from 'node:child_process';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';

/** How to build a store inside a child process. */
export interface CrossProcessOptions {
  /** Module (path or file URL) that exports a function returning a connected store (it may be async). */
  module: string | URL;
  /** Name of that export. @default 'createStore' */
  exportName?: string;
  /** Extra argument passed to that function in every process (e.g. a schema or prefix). */
  argument?: unknown;
  /** Processes to start. @default 4 */
  processes?: number;
  /** Claims each process makes. @default 2000 */
  claimsPerProcess?: number;
  /** Distinct keys the claims are spread over. @default 200 */
  keys?: number;
  /** Node flags for the children. @default ['--import', 'tsx'] when running from TypeScript source, else [] */
  execArgv?: string[];
}

/** What each child reports back. */
export interface StormWorkerReport {
  wins: string[];
  claims: number;
  errors: string[];
}

/** The configuration handed to a child through its environment. */
export interface StormWorkerConfig {
  module: string;
  exportName: string;
  argument: unknown;
  keys: string[];
  claims: number;
  seed: number;
}

/** Result of {@link runClaimStorm}. */
export interface ClaimStormResult {
  /** Winners per key across all processes. */
  winnersByKey: Map<string, number>;
  /** Claims made in total. */
  totalClaims: number;
  /** Errors reported by the children. */
  errors: string[];
}

const HERE = fileURLToPath(import.meta.url);
const EXT = extname(HERE);

/** Run the storm: start the children, release them together, collect every winner. */
export async function runClaimStorm(
  options: CrossProcessOptions,
  keys: string[],
): Promise<ClaimStormResult> {
  const processes = options.processes ?? 4;
  const claims = options.claimsPerProcess ?? 2000;
  const moduleUrl =
    options.module instanceof URL
      ? options.module.href
      : options.module.startsWith('file:')
        ? options.module
        : new URL(`file://${options.module}`).href;
  const worker = fileURLToPath(new URL(`./claim-worker${EXT}`, import.meta.url));
  const execArgv = options.execArgv ?? (EXT === '.ts' ? ['--import', 'tsx'] : []);

  const children = Array.from({ length: processes }, (_, index) => {
    const config: StormWorkerConfig = {
      module: moduleUrl,
      exportName: options.exportName ?? 'createStore',
      argument: options.argument,
      keys,
      claims,
      seed: index + 1,
    };
    return fork(worker, [], {
      execArgv,
      env: { ...process.env, IDEMPOTENCY_STORM_CONFIG: JSON.stringify(config) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
  });

  const ready = children.map(
    (child) =>
      new Promise<void>((resolve, reject) => {
        child.once('message', (message) => (message === 'ready' ? resolve() : reject(message)));
        child.once('exit', (code) => reject(new Error(`storm worker exited early with ${code}`)));
      }),
  );
  const reports = children.map(
    (child) =>
      new Promise<StormWorkerReport>((resolve, reject) => {
        child.on('message', (message) => {
          if (typeof message === 'object' && message !== null)
            resolve(message as StormWorkerReport);
        });
        child.once('exit', (code) => {
          if (code !== 0) reject(new Error(`storm worker exited with code ${code}`));
        });
      }),
  );
  try {
    await Promise.all(ready);
    // Every process is connected and waiting: release them at once so their claims really overlap.
    for (const child of children) child.send('go');
    const results = await Promise.all(reports);
    const winnersByKey = new Map<string, number>(keys.map((key) => [key, 0]));
    for (const result of results) {
      for (const key of result.wins) winnersByKey.set(key, (winnersByKey.get(key) ?? 0) + 1);
    }
    return {
      winnersByKey,
      totalClaims: results.reduce((sum, r) => sum + r.claims, 0),
      errors: results.flatMap((r) => r.errors),
    };
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  }
}
