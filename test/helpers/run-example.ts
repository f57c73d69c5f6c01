/**
 * Run one of `examples/*.ts` as a user would (`npx tsx examples/<name>.ts`): a real child process against
 * the real servers, whose output the test then reads. An example that rots (throws, hangs, prints
 * something else) fails the test instead of only failing to type-check.
 * @module
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';

const EXAMPLES = resolve(import.meta.dirname, '../../examples');
// Resolved here, not by the child: an example run from another working directory (a temporary one, so
// that `.data/` lands there) still finds tsx in this repository.
const TSX = import.meta.resolve('tsx');

// Process groups still running, killed if the test runner exits first (a timeout, a crash).
const live = new Set<number>();
process.on('exit', () => {
  for (const pid of live) killGroup(pid);
});

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/** How an example run ended. */
export interface ExampleRun {
  /** Exit code, or `null` when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Options of {@link runExample}. */
export interface RunExampleOptions {
  /** Added to this process's environment. */
  env?: Record<string, string>;
  /** Working directory. @default this process's */
  cwd?: string;
  /** Kill the example's whole process group after this long. @default 60 s (a loaded 2-CPU machine) */
  timeoutMs?: number;
}

/**
 * Run `examples/<file>` to its end and collect what it printed. The child leads a process group of its
 * own, killed as a whole when it overruns `timeoutMs` (no tsx or server child is left behind); the promise
 * then resolves with the signal, so the test fails on the exit status with the output so far.
 */
export function runExample(file: string, options: RunExampleOptions = {}): Promise<ExampleRun> {
  const child = spawn(process.execPath, ['--import', TSX, resolve(EXAMPLES, file)], {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const pid = child.pid;
  if (pid !== undefined) live.add(pid);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const timer = setTimeout(() => {
    stderr += `\n[runExample] ${file} still running after ${options.timeoutMs ?? 60_000} ms: killed`;
    if (pid !== undefined) killGroup(pid);
  }, options.timeoutMs ?? 60_000);
  return new Promise((resolvePromise, reject) => {
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    // 'close', not 'exit': both pipes are then read to their end.
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      // Not killed again here: once the group is gone its id may be another process's.
      if (pid !== undefined) live.delete(pid);
      resolvePromise({ code, signal, stdout, stderr });
    });
  });
}

/** Throw, with everything the example printed, unless it exited with status 0. */
export function assertExitedCleanly(file: string, run: ExampleRun): void {
  if (run.code === 0) return;
  throw new Error(
    `${file} exited with ${run.signal ?? `code ${run.code}`}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`,
  );
}
