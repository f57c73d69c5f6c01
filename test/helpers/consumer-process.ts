/**
 * Start the crash child (`consumer-child.ts`) and wait for its lines on stdout.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ChildConfig } from './consumer-child.js';

/** A running child consumer. */
export interface ChildConsumer {
  /** Resolves when the child printed `line`. */
  waitFor(line: string, timeoutMs?: number): Promise<void>;
  /** SIGKILL, and resolve once it exited. */
  kill9(): Promise<void>;
}

/** Spawn a consumer child process. */
export function spawnChildConsumer(config: ChildConfig): ChildConsumer {
  const child: ChildProcess = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(new URL('./consumer-child.ts', import.meta.url))],
    {
      env: { ...process.env, IK_CONSUMER_CHILD: JSON.stringify(config) },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let output = '';
  const listeners = new Set<() => void>();
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    for (const listener of listeners) listener();
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    waitFor(line, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (output.split('\n').some((l) => l.startsWith(line))) {
            listeners.delete(check);
            clearTimeout(timer);
            resolve();
          }
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(
            new Error(`child did not print '${line}' within ${timeoutMs} ms; output: ${output}`),
          );
        }, timeoutMs);
        listeners.add(check);
        void exited.then(() => {
          if (listeners.has(check)) {
            listeners.delete(check);
            clearTimeout(timer);
            reject(new Error(`child exited before printing '${line}'; output: ${output}`));
          }
        });
        check();
      });
    },
    async kill9() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
