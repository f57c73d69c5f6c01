/**
 * Start TypeScript child processes that wait at a barrier, so the work they do after 'go' really overlaps,
 * and collect the one JSON report each sends back.
 * @module
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Fork `count` copies of `script` (a path relative to this folder) with `args`, release them together, and
 * resolve with their reports in order. A child that exits without reporting rejects.
 */
export async function runChildren<T>(
  script: string,
  count: number,
  args: (index: number) => string[],
): Promise<T[]> {
  const path = fileURLToPath(new URL(script, import.meta.url));
  const children = Array.from({ length: count }, (_, index) =>
    fork(path, args(index), {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
  );
  try {
    const ready = children.map(
      (child) =>
        new Promise<void>((resolve, reject) => {
          child.once('message', () => resolve());
          child.once('exit', (code) => reject(new Error(`child exited early with ${code}`)));
        }),
    );
    await Promise.all(ready);
    const reports = children.map(
      (child) =>
        new Promise<T>((resolve, reject) => {
          child.on('message', (message) => resolve(message as T));
          child.once('exit', (code) => {
            if (code !== 0) reject(new Error(`child exited with ${code}`));
          });
        }),
    );
    for (const child of children) child.send('go');
    return await Promise.all(reports);
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  }
}

/** In a child: tell the parent it is ready, and resolve when the parent says go. */
export function barrier(): Promise<void> {
  return new Promise((resolve) => {
    process.once('message', () => resolve());
    process.send?.('ready');
  });
}

/** In a child: send the report, then exit. */
export function report(value: unknown): void {
  process.send?.(value, () => process.exit(0));
}
