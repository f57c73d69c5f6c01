/** Runs the `idempotency-kit` executable from source, as a user's shell would, and captures what it says. */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const main = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

/** What one run of the CLI printed, and its exit code. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run `idempotency-kit ...args` in a child process (through tsx), with `extraEnv` added to the environment. */
export function cli(args: string[], extraEnv: Record<string, string> = {}): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', main, ...args],
      { env: { ...process.env, ...extraEnv }, timeout: 60_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/**
 * Start `idempotency-kit ...args` in a child process (through tsx), for a test that signals it while it
 * runs: the child, and what it printed with its exit code once it ended (`null` when a signal ended it).
 */
export function startCli(args: string[]): {
  child: ChildProcess;
  exited: Promise<Omit<CliRun, 'code'> & { code: number | null }>;
} {
  const child = spawn(process.execPath, ['--import', 'tsx', main, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk) => {
    stdout += String(chunk);
  });
  child.stderr?.on('data', (chunk) => {
    stderr += String(chunk);
  });
  const exited = new Promise<Omit<CliRun, 'code'> & { code: number | null }>((resolve) =>
    // 'close', not 'exit': by then the child's output has all been read.
    child.on('close', (code) => resolve({ code, stdout, stderr })),
  );
  return { child, exited };
}
