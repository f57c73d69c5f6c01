/**
 * One role of the payments example (`ROLE=api|relay|worker|all`) as a real child process that a chaos
 * test can SIGKILL at any moment: it is restarted at once, as a supervisor (systemd, Kubernetes) would.
 * Keeps the tail of the output of every incarnation for the failure message.
 * @module
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';

const MAIN = resolve(import.meta.dirname, '../../examples/payments/main.ts');
const READY = 'payments example ready';
const TAIL_LINES = 40;

// Every process not yet stopped, so that a test that times out (or a crashing test runner) leaves no child
// behind holding a port or consuming messages.
const live = new Set<SupervisedProcess>();
process.on('exit', () => {
  for (const supervised of live) supervised.killNow();
});

/** Stop every supervised process still running (for `afterAll`). */
export async function stopAllProcesses(): Promise<void> {
  await Promise.all([...live].map((supervised) => supervised.stop()));
}

/** Options of {@link SupervisedProcess}. */
export interface SupervisedProcessOptions {
  /** The role (also the label in logs). */
  role: string;
  /** Environment of the child, on top of this process's. */
  env: Record<string, string>;
}

/** A child process kept running until {@link SupervisedProcess.stop}. */
export class SupervisedProcess {
  /** SIGKILLs sent by the chaos loop. */
  kills = 0;
  /** Incarnations started (1 + restarts). */
  starts = 0;
  /** Exits nobody asked for (a crash, or the process giving up on a lost connection). */
  unexpectedExits = 0;
  private child: ChildProcess | undefined;
  private ready = false;
  private stopped = false;
  private readonly tail: string[] = [];
  private readyWaiters: Array<() => void> = [];

  constructor(private readonly options: SupervisedProcessOptions) {}

  /** The role. */
  get role(): string {
    return this.options.role;
  }

  /** Whether the current incarnation printed its ready line. */
  get isReady(): boolean {
    return this.ready;
  }

  /** Start the first incarnation. */
  start(): void {
    live.add(this);
    this.spawn();
  }

  /** Resolve once the current (or next) incarnation is ready, or reject after `timeoutMs`. */
  waitReady(timeoutMs: number): Promise<void> {
    if (this.ready) return Promise.resolve();
    return new Promise((resolvePromise, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${this.role} not ready after ${timeoutMs} ms\n${this.output()}`)),
        timeoutMs,
      );
      this.readyWaiters.push(() => {
        clearTimeout(timer);
        resolvePromise();
      });
    });
  }

  /** SIGKILL the current incarnation; the supervisor starts the next one as soon as it is gone. */
  kill(): void {
    if (this.child === undefined || this.stopped) return;
    this.kills++;
    this.ready = false;
    this.child.kill('SIGKILL');
  }

  /** Stop for good: SIGKILL (nothing to preserve at the end of a chaos run) and wait for the exit. */
  async stop(): Promise<void> {
    this.stopped = true;
    live.delete(this);
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolvePromise) => {
      child.once('exit', () => resolvePromise());
      child.kill('SIGKILL');
    });
  }

  /** SIGKILL synchronously without restarting (from an `exit` handler). */
  killNow(): void {
    this.stopped = true;
    this.child?.kill('SIGKILL');
  }

  /** The last lines the role printed (all incarnations), for failure messages. */
  output(): string {
    return this.tail.map((line) => `[${this.role}] ${line}`).join('\n');
  }

  private record(chunk: Buffer): void {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (line.trim() === '') continue;
      this.tail.push(line);
      if (this.tail.length > TAIL_LINES) this.tail.shift();
      if (line.includes(READY)) {
        this.ready = true;
        const waiters = this.readyWaiters;
        this.readyWaiters = [];
        for (const wake of waiters) wake();
      }
    }
  }

  private spawn(): void {
    this.starts++;
    this.ready = false;
    const child = spawn(process.execPath, ['--import', 'tsx', MAIN], {
      env: { ...process.env, ...this.options.env, ROLE: this.options.role, QUIET: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    child.stdout?.on('data', (chunk: Buffer) => this.record(chunk));
    child.stderr?.on('data', (chunk: Buffer) => this.record(chunk));
    child.once('exit', (code, signal) => {
      if (this.child !== child) return;
      this.ready = false;
      if (this.stopped) return;
      if (signal !== 'SIGKILL') {
        this.unexpectedExits++;
        this.tail.push(`<exited: code ${code}, signal ${signal}>`);
      }
      // Restart at once, as a supervisor would (a short pause after an unexpected exit, to not spin).
      setTimeout(
        () => {
          if (!this.stopped) this.spawn();
        },
        signal === 'SIGKILL' ? 0 : 200,
      );
    });
  }
}
