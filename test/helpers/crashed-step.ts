/**
 * A crash after a recorded step, in one process: a run that records a step and then hangs, as a killed
 * process's would ({@link hangAfterCharge}, on any engine), and an engine on a memory store whose clock
 * the test moves past its lease ({@link manualEngine}, {@link crashAfterCharge}).
 */
import {
  createIdempotency,
  type Idempotency,
  type IdempotencyHooks,
  memoryStore,
} from '../../src/index.js';
import { ManualClock } from './clock.js';

/** The lease of {@link manualEngine}'s claims. */
export const MANUAL_LEASE_MS = 1000;

/** An engine on a memory store with a manual clock, a 1 s lease, no heartbeat and no local cache. */
export function manualEngine(hooks: IdempotencyHooks) {
  const clock = new ManualClock();
  const idempotency = createIdempotency({
    store: memoryStore({ clock }),
    clock,
    leaseMs: MANUAL_LEASE_MS,
    extendLease: false,
    cache: false,
    hooks,
  });
  return { clock, idempotency };
}

/**
 * Start a run of `request` on `idempotency` that records the step `charge` (its result from `step`) and
 * then hangs for good, as a killed process's would; resolve once the step is recorded. Any store, any
 * clock: the caller decides how the lease then ends.
 * @param wrap runs the crashed run inside something, such as an active span
 */
export async function hangAfterCharge(
  idempotency: Idempotency,
  request: Parameters<Idempotency['run']>[0],
  step: () => unknown = () => 'ch_1',
  wrap: (start: () => Promise<unknown>) => unknown = (start) => start(),
): Promise<void> {
  let charged!: () => void;
  const recorded = new Promise<void>((resolve) => {
    charged = resolve;
  });
  void wrap(() =>
    idempotency.run(request, async (ctx) => {
      await ctx.step('charge', step);
      charged();
      return new Promise(() => {});
    }),
  );
  await recorded;
}

/**
 * Start a run of `key` that records the step `charge` (its result from `step`) and then hangs; resolve
 * once its lease is over (the manual clock moved past it), so the next run of the same request takes it
 * over.
 * @param wrap runs the crashed run inside something, such as an active span
 */
export async function crashAfterCharge(
  engine: { clock: ManualClock; idempotency: Idempotency },
  key: string,
  step: () => unknown = () => 'ch_1',
  wrap: (start: () => Promise<unknown>) => unknown = (start) => start(),
): Promise<void> {
  await hangAfterCharge(engine.idempotency, { key }, step, wrap);
  engine.clock.advance(MANUAL_LEASE_MS + 1);
}
