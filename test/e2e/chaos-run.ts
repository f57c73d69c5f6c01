/**
 * One chaos run: start the deployment's processes, create the payments while SIGKILLing a random ready
 * process every 0.5–2 s (each is restarted at once), then stop the chaos, wait until the system settles,
 * and return what the clients and the database saw. Every loop is bounded by a deadline.
 * @module
 */
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ChaosBackend, LedgerView } from './chaos-backends.js';
import { type LoadResult, runPaymentLoad } from './payment-load.js';
import { SupervisedProcess } from './supervised-process.js';

/** Options of {@link runChaos}. */
export interface ChaosOptions {
  /** Payments to create. */
  payments: number;
  /** Payments in flight at once. */
  concurrency: number;
  /** Bounds of the random pause between two kills, in ms. */
  killEveryMs: [number, number];
  /** Kills happen only this long after the load starts (the rest of the load and the settling run calm). */
  chaosWindowMs: number;
  /** Spread the payments over at least this long (traffic arrives over time), so kills land mid-load. */
  minLoadMs: number;
  /** The whole run (load + settling) must end before this many ms. */
  budgetMs: number;
}

/** What a run produced. */
export interface ChaosReport {
  load: LoadResult;
  ledger: LedgerView;
  /** SIGKILLs per role. */
  kills: Record<string, number>;
  /** Exits nobody asked for, per role. */
  unexpectedExits: Record<string, number>;
  /** Load phase and settle phase durations, ms. */
  loadMs: number;
  settleMs: number;
  /** Every process's last output lines (for failure messages). */
  output: string;
}

/** A free loopback port (bound then released; the API binds it right after). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

const settled = (ledger: LedgerView, expected: number) =>
  ledger.payments.length >= expected && ledger.payments.every((p) => p.status === 'captured');

/** Run the scenario against `backend` (whose processes listen on `port`). */
export async function runChaos(
  backend: ChaosBackend,
  port: number,
  options: ChaosOptions,
): Promise<ChaosReport> {
  const started = Date.now();
  const deadline = started + options.budgetMs;
  const processes = backend.roles.map((role) => new SupervisedProcess({ role, env: backend.env }));
  try {
    for (const process of processes) process.start();
    // Generous: several TypeScript processes start at once on a loaded machine.
    await Promise.all(processes.map((process) => process.waitReady(60_000)));

    let loading = true;
    const chaosEnds = Date.now() + options.chaosWindowMs;
    const chaos = (async () => {
      const [min, max] = options.killEveryMs;
      let order: SupervisedProcess[] = [];
      while (loading && Date.now() < chaosEnds) {
        await sleep(min + Math.random() * (max - min));
        // Victims in shuffled rounds: every role is killed once per round, at random moments.
        if (order.length === 0) order = [...processes].sort(() => Math.random() - 0.5);
        const victim = order.shift() as SupervisedProcess;
        // Only once it finished starting: killing a process still booting would only stall progress.
        while (loading && !victim.isReady && Date.now() < chaosEnds) await sleep(50);
        if (loading && Date.now() < chaosEnds) victim.kill();
      }
    })();

    const loadStarted = Date.now();
    let load: LoadResult;
    try {
      load = await runPaymentLoad({
        baseUrl: `http://127.0.0.1:${port}`,
        payments: options.payments,
        concurrency: options.concurrency,
        keyPrefix: `chaos-${loadStarted}`,
        minDurationMs: options.minLoadMs,
        deadline,
      });
    } finally {
      loading = false;
      await chaos;
    }
    const loadMs = Date.now() - loadStarted;

    // Settle: every process back up, then wait for the last payments to be captured.
    const settleStarted = Date.now();
    await Promise.all(
      processes.map((process) => process.waitReady(Math.max(1, deadline - Date.now()))),
    );
    let ledger = await backend.inspect();
    while (!settled(ledger, load.paymentIds.size) && Date.now() < deadline) {
      await sleep(250);
      ledger = await backend.inspect();
    }
    return {
      load,
      ledger,
      kills: Object.fromEntries(processes.map((process) => [process.role, process.kills])),
      unexpectedExits: Object.fromEntries(
        processes.map((process) => [process.role, process.unexpectedExits]),
      ),
      loadMs,
      settleMs: Date.now() - settleStarted,
      output: processes.map((process) => process.output()).join('\n'),
    };
  } finally {
    await Promise.all(processes.map((process) => process.stop()));
  }
}
