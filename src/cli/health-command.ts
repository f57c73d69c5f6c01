/**
 * `health`: can a process use this store right now? Opens the store the command line names and probes it
 * once with {@link checkStoreHealth}, connecting and probing each within `--timeout`, so a readiness or
 * deployment check (an `exec` probe, a script gating a rollout) gets an answer in bounded time: exit 0 when
 * the store answered, 1 when it did not, with the reason. Failing to connect is a verdict here, not an
 * error; an invalid schema, table or prefix is a usage error, as for every command.
 * @module
 */
import { isInvalidOptionsError } from '../core/errors.js';
import { checkStoreHealth, type StoreHealth } from '../store/health.js';
import type { Print } from './commands.js';
import type { OpenTarget } from './targets.js';

/** What `health` reports: the probe's result and what was probed. */
export interface HealthReport extends StoreHealth {
  /** How the reports name what was probed (`public.idempotency_records`, `redis prefix idem:`, a file). */
  target: string;
}

/**
 * Open the store with `open` (connecting within `timeoutMs`) and probe it (within `timeoutMs` again);
 * print the verdict. `latencyMs` is the probe's, or the time spent when the store could not be opened.
 * @param named - The store's name and label, for a report when it could not even be opened.
 * @returns whether the store is healthy
 */
export async function healthCommand(
  open: (timeoutMs: number) => Promise<OpenTarget> | OpenTarget,
  named: { store: string; target: string },
  args: { timeoutMs: number; json: boolean },
  print: Print,
): Promise<boolean> {
  const started = performance.now();
  let report: HealthReport;
  let target: OpenTarget | undefined;
  try {
    target = await open(args.timeoutMs);
    const health = await checkStoreHealth(target.store, { timeout: args.timeoutMs });
    report = { ...health, latencyMs: roundedMs(health.latencyMs), target: target.label };
  } catch (error) {
    // A bad schema, table or prefix is the command line's fault, not the store's: a usage error (exit 2).
    if (isInvalidOptionsError(error)) throw error;
    report = {
      ok: false,
      store: named.store,
      latencyMs: roundedMs(performance.now() - started),
      target: named.target,
      error: { code: 'store_unavailable', message: (error as Error).message },
    };
  } finally {
    // A probe that ran out of time may leave a connection attempt behind: do not wait on it for long.
    await Promise.race([
      target?.close(),
      new Promise((resolve) => setTimeout(resolve, 200).unref()),
    ]);
  }
  print(args.json ? JSON.stringify(report) : healthLine(report));
  return report.ok;
}

function roundedMs(ms: number): number {
  return Math.round(ms * 10) / 10;
}

function healthLine(report: HealthReport): string {
  const where = `${report.target} (${report.store})`;
  if (report.ok) return `healthy: ${where} answered the probe in ${report.latencyMs} ms`;
  const error = report.error ?? { code: 'unknown', message: 'no answer' };
  return `unhealthy: ${where} after ${report.latencyMs} ms: ${error.code}: ${error.message}`;
}
