/**
 * `idempotency_execution_seconds` (and the `durationMs` of `onExecuted` and `onFailed` it is fed from) is
 * how long `fn` ran, as documented: not the completion or release that follows it, which a slow or failing
 * store can stretch to the whole lease.
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { prometheusHooks } from '../../../src/prometheus/index.js';
import { ManualClock } from '../../helpers/clock.js';
import { heldStore } from '../../helpers/held-store.js';

/** Wait until `held` has one `call` held, then move the clock on by `ms` and let the call through. */
async function slowCall(
  held: ReturnType<typeof heldStore>,
  call: 'complete' | 'release',
  clock: ManualClock,
  ms: number,
): Promise<void> {
  while (held.held(call) === 0) await new Promise((resolve) => setTimeout(resolve, 1));
  clock.advance(ms);
  await held.answerOldest(call);
}

describe('idempotency_execution_seconds', () => {
  it('measures fn alone, not the store call that settles its outcome', async () => {
    const registry = new Registry();
    const clock = new ManualClock();
    const held = heldStore(memoryStore({ clock }));
    const durations: Record<string, number> = {};
    const prometheus = prometheusHooks({ registry });
    const idempotency = createIdempotency({
      store: held.store,
      clock,
      leaseMs: 30_000,
      extendLease: false,
      hooks: {
        ...prometheus,
        onExecuted: (event) => {
          durations.executed = event.durationMs;
          prometheus.onExecuted?.(event);
        },
        onFailed: (event) => {
          durations.failed = event.durationMs;
          prometheus.onFailed?.(event);
        },
      },
    });

    held.hold('complete', true);
    const executed = idempotency.run({ key: 'slow-complete' }, () => {
      clock.advance(40);
      return 'ok';
    });
    await slowCall(held, 'complete', clock, 2000);
    await expect(executed).resolves.toMatchObject({ status: 'executed' });

    held.hold('release', true);
    const failed = idempotency.run({ key: 'slow-release' }, () => {
      clock.advance(25);
      throw new Error('declined');
    });
    await slowCall(held, 'release', clock, 3000);
    await expect(failed).rejects.toThrow('declined');

    expect(durations).toEqual({ executed: 40, failed: 25 });
    const text = await registry.metrics();
    expect(text).toContain(
      'idempotency_execution_seconds_sum{namespace="default",outcome="executed"} 0.04',
    );
    expect(text).toContain(
      'idempotency_execution_seconds_sum{namespace="default",outcome="failed"} 0.025',
    );
  });
});
