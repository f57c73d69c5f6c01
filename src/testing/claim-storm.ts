/**
 * The cross-process claim storm: several OS processes, each with its own store instance, claim the same keys
 * at the same moment; exactly one claim per key may win.
 * @module
 */
import type { fork } from 'node:child_process';
import { CROSS_PROCESS_FIELDS, checkOptionNames } from './option-names.js';
import { forkStormWorkers, stormDeadline } from './storm-processes.js';
import type { TakeoverStormOptions } from './takeover-storm.js';

/** How to build a store inside a child process. */
export interface CrossProcessOptions {
  /**
   * Module that exports a function returning a connected store (it may be async): a file URL, or a path
   * (relative to the working directory). A TypeScript module may be named by its `.ts` file, or by the
   * `.js` name its imports use (`new URL('./my-store-factory.js', import.meta.url)` next to a
   * `my-store-factory.ts`); it is then loaded through `tsx`, which the project must have installed.
   */
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
  /**
   * Node flags for the children. @default ['--import', 'tsx'] when the module (or this kit) is TypeScript
   * source, else []
   */
  execArgv?: string[];
  /**
   * The longest the storm may take, from starting the processes to their last report, in ms: past it
   * every process is killed and the storm fails, rather than leaving them running behind a test that
   * timed out (a factory that never connects, a store call that never returns). Below the suite's 60 s
   * per check, so the storm's own error is the one reported. @default 50_000
   */
  timeoutMs?: number;
  /**
   * The takeover storm, run by the suite after the claim storm with the same processes' settings: short
   * leases that end, generation after generation, so that every process races to take the dead records
   * over while their crashed holders try to complete (see {@link TakeoverStormOptions}). `false` skips it
   * knowingly. @default {} (16 keys, 4 generations, 1 s leases: about 5 s)
   */
  takeovers?: TakeoverStormOptions | false;
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

const ignore = () => {};

/** One child of the storm: when it is ready, and the report it sends before it exits. */
interface Worker {
  ready: Promise<void>;
  report: Promise<StormWorkerReport>;
}

/**
 * Follow `child` to its report. Both promises are marked handled at once: when one child fails, the storm
 * stops waiting for the others (and kills them), whose own failures must not surface as unhandled
 * rejections in the test run.
 */
function follow(child: ReturnType<typeof fork>, index: number): Worker {
  let ready = false;
  let reported = false;
  const worker: Worker = {
    ready: new Promise<void>((resolve, reject) => {
      child.on('message', (message) => {
        if (message === 'ready') {
          ready = true;
          resolve();
        }
      });
      child.once('exit', (code, signal) => {
        if (!ready) {
          reject(
            new Error(
              `storm worker ${index} exited (${signal ?? `code ${code}`}) before its store was ready: ` +
                'see its output above (a TypeScript module needs tsx installed, or `execArgv`)',
            ),
          );
        }
      });
    }),
    report: new Promise<StormWorkerReport>((resolve, reject) => {
      child.on('message', (message) => {
        if (typeof message === 'object' && message !== null) {
          reported = true;
          resolve(message as StormWorkerReport);
        }
      });
      // 'close' comes after the IPC channel closed: every message the child sent has arrived by then.
      child.once('close', (code, signal) => {
        if (!reported) {
          reject(
            new Error(
              `storm worker ${index} exited (${signal ?? `code ${code}`}) without a report`,
            ),
          );
        }
      });
    }),
  };
  worker.ready.catch(ignore);
  worker.report.catch(ignore);
  return worker;
}

/** Run the storm: start the children, release them together, collect every winner. */
export async function runClaimStorm(
  options: CrossProcessOptions,
  keys: string[],
): Promise<ClaimStormResult> {
  checkOptionNames(options, 'runClaimStorm', CROSS_PROCESS_FIELDS);
  const claims = options.claimsPerProcess ?? 2000;
  const children = forkStormWorkers(
    options,
    'claim-worker',
    'IDEMPOTENCY_STORM_CONFIG',
    (base): StormWorkerConfig => ({ ...base, keys, claims }),
  );
  const workers = children.map(follow);
  const { deadline, clear } = stormDeadline('claim storm', options.timeoutMs ?? 50_000);
  try {
    await Promise.race([Promise.all(workers.map((w) => w.ready)), deadline]);
    // Every process is connected and waiting: release them at once so their claims really overlap.
    for (const child of children) child.send('go');
    const results = await Promise.race([Promise.all(workers.map((w) => w.report)), deadline]);
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
    clear();
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }
}
