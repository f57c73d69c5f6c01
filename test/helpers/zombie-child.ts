/**
 * Child process of the paused-zombie test: claims a key through the engine on a shared store and runs a
 * handler that tells the parent it is executing, then waits for the parent's `finish` message. The parent
 * freezes this process (SIGSTOP) in between, lets its lease run out and takes the key over; once thawed
 * (SIGCONT), this process finishes its handler as if nothing happened and reports what the engine did with
 * its late completion.
 */
import { createIdempotency, type Store } from '../../src/index.js';

/** What the parent passes in `IK_ZOMBIE`. */
export interface ZombieConfig {
  /** Module exporting `createStore(argument)` (a store factory shared with the other child tests). */
  storeModule: string;
  storeArgument: unknown;
  namespace: string;
  key: string;
  payload: unknown;
  leaseMs: number;
}

/** What the child reports, in order: executing, then the side effect it made, then the run's end. */
export type ZombieMessage =
  | { type: 'executing'; token: number; attempt: number }
  | { type: 'side-effect' }
  | { type: 'lease-lost' }
  | { type: 'resolved'; outcome: unknown }
  | { type: 'rejected'; name: string; code: string | undefined };

const config = JSON.parse(process.env.IK_ZOMBIE ?? '{}') as ZombieConfig;
const send = (message: ZombieMessage) => process.send?.(message);

async function main(): Promise<void> {
  const factory = (await import(config.storeModule)) as {
    createStore(argument: unknown): Store | Promise<Store>;
  };
  const store = await factory.createStore(config.storeArgument);
  const finish = new Promise<void>((resolve) => {
    process.on('message', (message) => {
      if (message === 'finish') resolve();
    });
  });
  const idempotency = createIdempotency({
    store,
    namespace: config.namespace,
    leaseMs: config.leaseMs,
    hooks: { onLeaseLost: () => send({ type: 'lease-lost' }) },
  });
  try {
    const outcome = await idempotency.run(
      { key: config.key, payload: config.payload },
      async (ctx) => {
        send({ type: 'executing', token: ctx.token, attempt: ctx.attempt });
        await finish;
        // The effect a zombie makes whatever happens to its record: the record must not say it won.
        send({ type: 'side-effect' });
        return 'from the zombie';
      },
    );
    send({ type: 'resolved', outcome });
  } catch (error) {
    const { name, code } = error as { name: string; code?: string };
    send({ type: 'rejected', name, code });
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
