/**
 * Child process of the steps kill test: runs one order (a `charge` step, then a `ship` step) on a shared
 * store, appending each step's effect to a file as it happens, and stops where the parent asks, telling
 * it so, to be killed there with SIGKILL: inside the charge, after its effect but before its recording,
 * or after the charge was recorded. Without a stop it runs to the end and reports the run's outcome.
 */
import { appendFileSync } from 'node:fs';
import { createIdempotency, type Store } from '../../src/index.js';

/** Where the child stops for good (`none`: nowhere). */
export type StepsKillStop = 'in-charge' | 'after-charge' | 'none';

/** What the parent passes in `IK_STEPS_KILL`. */
export interface StepsKillConfig {
  /** Module exporting `createStore(argument)` (a store factory shared with the other child tests). */
  storeModule: string;
  storeArgument: unknown;
  namespace: string;
  key: string;
  leaseMs: number;
  /** The file each step's effect is appended to, one JSON line per effect. */
  effectsFile: string;
  stop: StepsKillStop;
}

/** One line of the effects file. */
export interface StepEffect {
  step: 'charge' | 'ship';
  pid: number;
  attempt: number;
  downstreamKey: string;
}

const config = JSON.parse(process.env.IK_STEPS_KILL ?? '{}') as StepsKillConfig;

// Tell the parent, then wait for the kill: nothing after this point runs.
function stopHere(): Promise<never> {
  process.send?.({ type: 'stopped' });
  setInterval(() => {}, 60_000);
  return new Promise<never>(() => {});
}

function effect(line: StepEffect): void {
  // One write per line with O_APPEND: lines of processes killed mid-run never interleave.
  appendFileSync(config.effectsFile, `${JSON.stringify(line)}\n`);
}

async function main(): Promise<void> {
  const factory = (await import(config.storeModule)) as {
    createStore(argument: unknown): Store | Promise<Store>;
  };
  const idempotency = createIdempotency({
    store: await factory.createStore(config.storeArgument),
    namespace: config.namespace,
    leaseMs: config.leaseMs,
    cache: false,
  });
  for (;;) {
    const outcome = await idempotency.run(
      { key: config.key, payload: { amount: 4200 } },
      async (ctx) => {
        const charge = await ctx.step('charge', async ({ downstreamKey, attempt }) => {
          effect({ step: 'charge', pid: process.pid, attempt, downstreamKey });
          if (config.stop === 'in-charge') await stopHere();
          return { id: `ch-${process.pid}` };
        });
        if (config.stop === 'after-charge') await stopHere();
        const shipment = await ctx.step('ship', ({ downstreamKey, attempt }) => {
          effect({ step: 'ship', pid: process.pid, attempt, downstreamKey });
          return { tracking: `trk-${charge.id}` };
        });
        return { charge: charge.id, tracking: shipment.tracking, attempt: ctx.attempt };
      },
    );
    // The killed attempt's lease may not have ended yet on the store's clock: wait, as a client would.
    if (outcome.status === 'in_progress') {
      await new Promise((resolve) => setTimeout(resolve, outcome.retryAfterMs));
      continue;
    }
    process.send?.({ type: 'outcome', outcome });
    return;
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.send?.({ type: 'error', error: String(error) });
    process.exit(1);
  },
);
