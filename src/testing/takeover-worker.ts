/**
 * Child process of the takeover storm (see `takeover-storm.ts`): builds its own store, then, at each
 * generation the runner starts, claims every key once with a short lease (all at the same moment, some in
 * a batch when the store takes batches) while completing, with their stale tokens, the keys it won in the
 * generation before; at the end it completes the keys it holds. Never completes or releases a key it
 * wins otherwise: each generation's holders "crash", so the next generation's claims are takeovers. A
 * crashed holder does not claim its own keys again (when there are other processes): every takeover is
 * by another process, so the keys change hands between store instances, where tokens drawn from one
 * process's counter fall behind (the first process to hear of a generation often wins every key, and a
 * store that only ever hands keys to itself shows no such fault).
 * @module
 */
import type { Store } from '../store/store.js';
import type {
  TakeoverGenerationOrder,
  TakeoverHold,
  TakeoverWorkerConfig,
  TakeoverWorkerMessage,
} from './takeover-storm.js';

// The runner went away (it exited, or its test timed out): stop, rather than hold the store's connections.
process.on('disconnect', () => process.exit(1));

const send = (message: TakeoverWorkerMessage) =>
  new Promise<void>((resolve) => process.send?.(message, () => resolve()));

/** One generation: claim every key once, and complete the stale holds, all at the same time. */
async function generation(
  store: Store,
  config: TakeoverWorkerConfig,
  order: TakeoverGenerationOrder,
): Promise<TakeoverWorkerMessage> {
  const errors: string[] = [];
  const wins: TakeoverHold[] = [];
  // Every other key keeps a reservation past its lease, so the dead record survives (also on a store whose
  // keys expire with their lease, like Redis) and the same request's next claim takes it over.
  const claimOf = (key: string, index: number) => ({
    key,
    fingerprint: 'takeover',
    leaseMs: config.leaseMs,
    ...(index % 2 === 0 ? { reserveMs: config.leaseMs * 60 } : {}),
  });
  // Each process walks the keys from its own offset, so the takeovers of a key overlap.
  const held = new Set(config.processes > 1 ? order.stale.map(({ key }) => key) : []);
  const keys = config.keys
    .map((_, i) => config.keys[(i + config.seed * 7) % config.keys.length]!)
    .filter((key) => !held.has(key));
  const batched = store.capabilities.batch === true && typeof store.claimMany === 'function';
  const inBatch = batched ? keys.filter((_, i) => i % 2 === 1) : [];
  const single = batched ? keys.filter((_, i) => i % 2 === 0) : keys;
  const requests = (list: string[]) => list.map((key) => claimOf(key, config.keys.indexOf(key)));

  const claims = [
    ...requests(single).map(async (request) => {
      try {
        const result = await store.claim(request.key, request);
        if (result.claimed) wins.push({ key: request.key, token: result.token });
      } catch (error) {
        errors.push(`claim of ${request.key}: ${String(error)}`);
      }
    }),
    (async () => {
      if (inBatch.length === 0) return;
      try {
        const results = await store.claimMany!(requests(inBatch));
        for (const [i, result] of results.entries()) {
          if (result.claimed) wins.push({ key: inBatch[i]!, token: result.token });
        }
      } catch (error) {
        errors.push(`claimMany: ${String(error)}`);
      }
    })(),
  ];
  const stale = order.stale.map(async ({ key, token }) => {
    try {
      const ok = await store.complete(key, token, Buffer.from('stale'), 60_000);
      return { key, token, ok };
    } catch (error) {
      errors.push(`stale complete of ${key}: ${String(error)}`);
      return { key, token, ok: false };
    }
  });
  const [, staleResults] = await Promise.all([Promise.all(claims), Promise.all(stale)]);
  return { type: 'generation', generation: order.generation, wins, stale: staleResults, errors };
}

async function main(): Promise<void> {
  const config = JSON.parse(
    process.env.IDEMPOTENCY_TAKEOVER_CONFIG ?? '{}',
  ) as TakeoverWorkerConfig;
  const mod = (await import(config.module)) as Record<
    string,
    (arg: unknown) => Promise<Store> | Store
  >;
  const factory = mod[config.exportName];
  if (typeof factory !== 'function')
    throw new Error(`${config.module} has no ${config.exportName}()`);
  const store = await factory(config.argument);

  process.on('message', (message: TakeoverGenerationOrder | { finish: TakeoverHold[] }) => {
    void (async () => {
      if ('finish' in message) {
        const completed = await Promise.all(
          message.finish.map(async ({ key, token }) => {
            try {
              return {
                key,
                token,
                ok: await store.complete(key, token, Buffer.from('done'), 60_000),
              };
            } catch {
              return { key, token, ok: false };
            }
          }),
        );
        await store.close?.();
        await send({ type: 'finished', completed });
        // The factory may have opened clients the store does not own (and so does not close).
        process.exit(0);
      }
      await send(await generation(store, config, message));
    })();
  });
  await send({ type: 'ready' });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
