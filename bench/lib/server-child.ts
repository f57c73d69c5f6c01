/**
 * Starting a benchmark's server in a child process of its own (so the load generator and the server do
 * not share an event loop): `bench/lib/http-server.ts` or `bench/peers/server.ts`, run through tsx, which
 * report their port over IPC once listening.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** A running server child and the URL of its `POST /orders` route. */
export interface ServerChild {
  url: string;
  child: ChildProcess;
}

/**
 * Fork `script` with `env` added to this process's environment and `execArgv` after tsx's `--import`, and
 * resolve once it reports its port (reject if it exits first).
 */
export async function startServerChild(
  script: URL,
  env: Record<string, string>,
  execArgv: string[] = [],
): Promise<ServerChild> {
  const child = fork(fileURLToPath(script), [], {
    execArgv: ['--import', 'tsx', ...execArgv],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    // Other messages (a preloaded probe's answers) may share the channel: wait for the port's.
    const onMessage = (message: { port?: number }) => {
      if (message.port === undefined) return;
      child.off('message', onMessage);
      resolve(message.port);
    };
    child.on('message', onMessage);
    child.once('exit', (code) =>
      reject(new Error(`bench server ${fileURLToPath(script)} exited (${code})`)),
    );
  });
  return { url: `http://127.0.0.1:${port}/orders`, child };
}
