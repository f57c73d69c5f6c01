/**
 * A store's health, for readiness probes: can this process use the store right now? The probe is one
 * `get` of a key no request can have (`storage keys` are digests), so it takes the path every request
 * takes (the connection, the Redis scripts, the PostgreSQL or SQLite table and its migrations) and
 * writes nothing. A broken store is an answer, not an exception: it throws only for a bad `timeout`.
 * @module
 */
import { type Duration, MAX_TIMER_MS } from '../core/duration.js';
import { durationOption } from '../core/option-checks.js';
import type { Store } from './store.js';

/** The key the probe reads: not a storage key's form (hex digests), so it is never a request's record. */
export const HEALTH_PROBE_KEY = 'idempotency-kit:health-probe';

/** Options of {@link checkStoreHealth}. */
export interface StoreHealthOptions {
  /**
   * How long the probe may take before the store is reported unhealthy (the store's own timeouts, such as
   * the Redis store's `timeoutMs`, still apply inside it); at most 2³¹−1 ms (about 24.8 days), a timer's
   * limit. @default '1s'
   */
  timeout?: Duration;
}

/** What {@link checkStoreHealth} found. */
export interface StoreHealth {
  /** The store answered the probe within the timeout. */
  ok: boolean;
  /** The store's `name` (`'redis'`, `'postgres'`, …). */
  store: string;
  /** How long the probe took, in ms (the timeout, when it ran out). */
  latencyMs: number;
  /**
   * Why the store is not usable, when `ok` is false: the error's stable `code` (`store_unavailable`,
   * `timeout`, or the driver's code when it had a string one) and its message, which names the fix where
   * the store knows it (a migration not yet applied, a Redis eviction policy).
   */
  error?: { code: string; message: string };
}

/**
 * Probe `store` once and say whether it is usable. Wire it to a readiness endpoint: a process whose store is
 * unreachable answers every protected request with 503 (fail closed), so it should not take traffic.
 * @example
 * app.get('/readyz', async (_req, res) => {
 *   const health = await checkStoreHealth(store, { timeout: '500ms' });
 *   res.status(health.ok ? 200 : 503).json(health);
 * });
 */
export async function checkStoreHealth(
  store: Store,
  options: StoreHealthOptions = {},
): Promise<StoreHealth> {
  // A timer: past MAX_TIMER_MS Node fires it at once, and a healthy store would be reported timed out.
  const timeoutMs = durationOption(options.timeout, 'checkStoreHealth: timeout', 1000, {
    maxMs: MAX_TIMER_MS,
  });
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
    timer.unref();
  });
  try {
    const result = await Promise.race([
      store.get(HEALTH_PROBE_KEY).then(() => 'ok' as const),
      timedOut,
    ]);
    const latencyMs = performance.now() - started;
    if (result === 'ok') return { ok: true, store: store.name, latencyMs };
    return {
      ok: false,
      store: store.name,
      latencyMs,
      error: { code: 'timeout', message: `the store did not answer within ${timeoutMs} ms` },
    };
  } catch (error) {
    return {
      ok: false,
      store: store.name,
      latencyMs: performance.now() - started,
      error: describe(error),
    };
  } finally {
    clearTimeout(timer);
  }
}

function describe(error: unknown): { code: string; message: string } {
  const code = (error as { code?: unknown } | null)?.code;
  const message = (error as { message?: unknown } | null)?.message;
  return {
    code: typeof code === 'string' ? code : ((error as Error | null)?.name ?? 'error'),
    message: typeof message === 'string' ? message : String(error),
  };
}
