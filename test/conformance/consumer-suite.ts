/**
 * The consumer conformance suite: one script, run against every broker with real servers on loopback.
 * Each case gets its own queue / stream / subject and its own store prefix; everything is deleted in
 * afterAll. Records live in the Redis store, so consumers in other processes share them.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConsumerContext } from '../../src/consumer/index.js';
import { createIdempotency, type Idempotency, isStoreUnavailableError } from '../../src/index.js';
import { type RedisStore, redisStore } from '../../src/redis/index.js';
import {
  BROKER_TIMING,
  type BrokerCase,
  type BrokerName,
  openBrokerCase,
  type RunningConsumer,
  type StartOptions,
} from '../helpers/consumer-brokers.js';
import { spawnChildConsumer } from '../helpers/consumer-process.js';
import { env, requireService } from '../helpers/env.js';
import { heldStore } from '../helpers/held-store.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../helpers/redis-clients.js';
import { startRedisProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { waitUntil as pollUntil } from '../helpers/wait-until.js';

const SERVICE: Record<BrokerName, [string, string]> = {
  amqp: ['RabbitMQ', env.amqpUrl],
  nats: ['NATS', env.natsUrl],
  'redis-streams': ['Redis', env.redisUrl],
};

/** Poll `predicate` until it holds, or fail after `timeoutMs` with `what`. */
const waitUntil = (what: string, predicate: () => boolean | Promise<boolean>, timeoutMs = 30_000) =>
  pollUntil(what, predicate, timeoutMs, 25);

/** Counts what consumers of one case did. */
function tally() {
  const counts = { executed: 0, duplicate: 0, inProgress: 0, deadLetter: 0, handlerCalls: 0 };
  const contexts: ConsumerContext[] = [];
  const hooks = {
    onExecuted: () => void counts.executed++,
    onDuplicate: () => void counts.duplicate++,
    onRetry: (event: { reason: string }) => {
      if (event.reason === 'in_progress') counts.inProgress++;
    },
    onDeadLetter: () => void counts.deadLetter++,
  };
  return { counts, contexts, hooks };
}

/** What consumers over a store with hung calls did, by key. */
interface HungEvents {
  calls: string[];
  executed: Array<string | undefined>;
  duplicates: Array<string | undefined>;
  retries: Array<{ key: string | undefined; reason: string; error?: unknown }>;
  brokerErrors: Array<{ key: string | undefined; operation: string; error: unknown }>;
  deadLetters: number;
}

function hungEvents(): HungEvents {
  return { calls: [], executed: [], duplicates: [], retries: [], brokerErrors: [], deadLetters: 0 };
}

/** Define the suite for `broker`. */
export function defineConsumerSuite(broker: BrokerName): void {
  describe(`consumer conformance: ${broker}`, () => {
    const run = randomUUID().slice(0, 8);
    const prefix = `idemtest:consumer:${broker}:${run}:`;
    const cases: BrokerCase[] = [];
    const consumers: RunningConsumer[] = [];
    let redis: TestRedisClient;
    let store: RedisStore;

    beforeAll(async () => {
      await requireService(...SERVICE[broker]);
      await requireService('Redis', env.redisUrl);
      redis = await connectClient('node-redis', env.redisUrl);
      store = redisStore({ client: redis.client, prefix, checkEvictionPolicy: false });
    });

    afterAll(async () => {
      for (const consumer of consumers) await consumer.close().catch(() => {});
      for (const brokerCase of cases) await brokerCase.destroy().catch(() => {});
      if (redis !== undefined) {
        await deleteKeys(redis.client, prefix);
        await redis.close();
      }
    });

    // Each case has its own resources and its own consumer name, hence its own key scope.
    async function newCase(
      name: string,
    ): Promise<{ id: string; brokerCase: BrokerCase; worker: string }> {
      const id = `${run}-${name}`;
      const brokerCase = await openBrokerCase(broker, id);
      cases.push(brokerCase);
      return { id, brokerCase, worker: `worker-${name}` };
    }

    function engine(leaseMs = 10_000): Idempotency {
      return createIdempotency({ store, leaseMs });
    }

    async function start(brokerCase: BrokerCase, ...args: Parameters<BrokerCase['start']>) {
      const consumer = await brokerCase.start(...args);
      consumers.push(consumer);
      return consumer;
    }

    /**
     * Run `body` with a store on the suite's prefix (300 ms call timeout) whose client goes through a
     * proxy that can cut the link to the real Redis server (`proxy.cut()`, `proxy.restore()`): a store
     * outage on demand, for the cases that check what a consumer does through one. The client and the
     * proxy are closed however `body` ends.
     */
    async function withStoreOutage(
      body: (outage: { proxy: TcpProxy; outageStore: RedisStore }) => Promise<void>,
    ): Promise<void> {
      const proxy = await startRedisProxy(env.redisUrl);
      const proxied = await connectClient('node-redis', proxy.url);
      try {
        const outageStore = redisStore({
          client: proxied.client,
          prefix,
          checkEvictionPolicy: false,
          timeoutMs: 300,
        });
        await body({ proxy, outageStore });
      } finally {
        await proxied.close();
        await proxy.close();
      }
    }

    /**
     * A consumer whose first execution never settles (a handler hung on a call without a timeout), on an
     * engine with a short lease and `maxExecution`; later executions return at once.
     */
    function startHung(brokerCase: BrokerCase, worker: string, run: ReturnType<typeof tally>) {
      return start(
        brokerCase,
        () => {
          run.counts.handlerCalls++;
          return run.counts.handlerCalls === 1 ? new Promise(() => {}) : undefined;
        },
        {
          idempotency: createIdempotency({ store, leaseMs: 500, maxExecution: '1s' }),
          name: worker,
          hooks: run.hooks,
          drainTimeout: '100ms',
          minRetryDelay: '100ms',
          maxRetryDelay: '300ms',
        },
      );
    }

    it('executes a message published 20 times once and acks every copy', async () => {
      const { brokerCase, worker } = await newCase('twenty');
      const { counts, hooks } = tally();
      for (let i = 0; i < 20; i++) await brokerCase.publish('order-1', `copy ${i}`);

      await start(
        brokerCase,
        async () => {
          counts.handlerCalls++;
          await sleep(50);
        },
        { idempotency: engine(), name: worker, concurrency: 10, hooks },
      );

      await waitUntil('20 settled copies', () => counts.executed + counts.duplicate === 20);
      expect(counts.handlerCalls).toBe(1);
      expect(counts.executed).toBe(1);
      expect(counts.duplicate).toBe(19);
    });

    it('executes concurrent duplicates on 2 consumers once per key', async () => {
      const { brokerCase, worker } = await newCase('two');
      const { counts, hooks } = tally();
      const calls = new Map<string, number>();
      const handler = async (_message: unknown, context: ConsumerContext) => {
        calls.set(context.key, (calls.get(context.key) ?? 0) + 1);
        await sleep(200);
      };
      const options = { name: worker, concurrency: 5, hooks };
      await start(brokerCase, handler, { ...options, idempotency: engine() });
      await start(brokerCase, handler, { ...options, idempotency: engine() });

      for (let copy = 0; copy < 4; copy++) {
        for (let key = 0; key < 5; key++) await brokerCase.publish(`order-${key}`, `copy ${copy}`);
      }

      await waitUntil('20 settled copies', () => counts.executed + counts.duplicate === 20);
      expect([...calls.values()]).toEqual([1, 1, 1, 1, 1]);
      expect(counts.executed).toBe(5);
    });

    it('still executes a key the HTTP API already completed: scopes never collide', async () => {
      const { brokerCase, worker } = await newCase('scope');
      const { counts, hooks } = tally();
      const idempotency = engine();
      await idempotency.run({ key: 'shared-key', scope: 'tenant-1' }, () => 'api response');
      await idempotency.run({ key: 'shared-key' }, () => 'api response, no scope');

      await brokerCase.publish('shared-key', 'work');
      await start(brokerCase, async () => void counts.handlerCalls++, {
        idempotency,
        name: worker,
        hooks,
      });

      await waitUntil('the worker execution', () => counts.executed === 1);
      expect(counts.handlerCalls).toBe(1);
    });

    it('retries a failing handler, then dead-letters it after maxDeliveries with the error', async () => {
      const { brokerCase, worker } = await newCase('poison');
      const { counts, hooks } = tally();
      const deliveries: number[] = [];
      await brokerCase.publish('poison-1', 'bad');

      await start(
        brokerCase,
        async (_message, context) => {
          deliveries.push(context.deliveryCount);
          throw new Error('boom');
        },
        {
          idempotency: engine(),
          name: worker,
          maxDeliveries: 3,
          backoff: { initial: 50, max: 200, jitter: false },
          hooks,
        },
      );

      await waitUntil('the dead letter', () => counts.deadLetter === 1);
      expect(deliveries).toEqual([1, 2, 3]);
      const letters = await brokerCase.deadLetters();
      expect(letters).toHaveLength(1);
      expect(letters[0]).toMatchObject({
        key: 'poison-1',
        reason: 'handler_error',
        deliveries: 3,
        error: { name: 'Error', message: 'boom' },
      });
      // The claim was released, so a replay from the dead-letter queue runs the handler again.
      const storageKey = engine().storageKeyFor('poison-1', `consumer:${worker}`);
      expect(await store.get(storageKey)).toBeUndefined();
      await sleep(300);
      expect(deliveries).toHaveLength(3);
    });

    it('retries a handler error and then runs it, even on an engine that stores errors', async () => {
      const { brokerCase, worker } = await newCase('store-errors');
      const { counts, hooks } = tally();
      await brokerCase.publish('flaky-1', 'work');

      // An engine shared with the HTTP middleware may store errors as final; the consumer's own rule holds.
      await start(
        brokerCase,
        async () => {
          counts.handlerCalls++;
          if (counts.handlerCalls === 1) throw new Error('gateway timeout');
        },
        {
          idempotency: createIdempotency({ store, leaseMs: 10_000, storeErrors: true }),
          name: worker,
          maxDeliveries: 3,
          backoff: { initial: 50, max: 200, jitter: false },
          hooks,
        },
      );

      await waitUntil('the execution after the retry', () => counts.executed === 1, 10_000);
      expect(counts.handlerCalls).toBe(2);
      expect(counts.duplicate).toBe(0);
      expect(counts.deadLetter).toBe(0);
    });

    it('redelivers the message of a consumer killed mid-handler and executes it once, after the lease, resuming from its steps', async () => {
      const { id, brokerCase, worker } = await newCase('kill');
      const { counts, contexts, hooks } = tally();
      const charges: string[] = [];
      const leaseMs = 3000;
      await brokerCase.publish('crash-1', 'work');
      const child = spawnChildConsumer({ broker, id, prefix, name: worker, leaseMs });
      await child.waitFor('STARTED crash-1');
      const claimedAt = Date.now();
      await child.kill9();

      let executedAt = 0;
      await start(
        brokerCase,
        async (_message, context) => {
          counts.handlerCalls++;
          contexts.push(context);
          executedAt = Date.now();
          charges.push(await context.step('charge', () => 'charged again'));
        },
        { idempotency: engine(leaseMs), name: worker, hooks },
      );

      await waitUntil('the takeover execution', () => counts.executed === 1);
      expect(counts.handlerCalls).toBe(1);
      // The dead child's charge was recorded: the takeover got its result and did not charge again.
      expect(charges).toHaveLength(1);
      expect(charges[0]).toMatch(/^charged-by-\d+$/);
      expect(contexts[0]?.attempt).toBe(2);
      // The redelivery first met the dead child's live claim (in progress, not acked), and ran only once
      // that claim's lease had run out.
      expect(counts.inProgress).toBeGreaterThan(0);
      expect(executedAt - claimedAt).toBeGreaterThanOrEqual(leaseMs - 500);
      expect(contexts[0]?.token).toBeGreaterThan(0);
    });

    it('does not lose an in-progress duplicate when the holder crashes: the duplicate is executed', async () => {
      const { id, brokerCase, worker } = await newCase('dup-crash');
      const { counts, hooks } = tally();
      const leaseMs = 3000;
      await brokerCase.publish('held-1', 'copy 1');
      const child = spawnChildConsumer({ broker, id, prefix, name: worker, leaseMs });
      await child.waitFor('STARTED held-1');

      await start(brokerCase, async () => void counts.handlerCalls++, {
        idempotency: engine(leaseMs),
        name: worker,
        hooks,
      });
      await brokerCase.publish('held-1', 'copy 2');
      // The live holder makes the duplicate wait (redelivered later, never acked)…
      await waitUntil('an in-progress redelivery', () => counts.inProgress > 0);
      expect(counts.handlerCalls).toBe(0);
      await child.kill9();

      // …and once the holder is gone, the key is executed once and both copies are settled.
      await waitUntil('both copies settled', () => counts.executed + counts.duplicate === 2);
      expect(counts.handlerCalls).toBe(1);
      expect(counts.executed).toBe(1);
      expect(counts.deadLetter).toBe(0);
    });

    it('redelivers later while the store is unreachable, then executes once: never acked, never dead-lettered', async () => {
      const { brokerCase, worker } = await newCase('outage');
      const { counts, hooks } = tally();
      await withStoreOutage(async ({ proxy, outageStore }) => {
        let unavailable = 0;
        proxy.cut();
        await brokerCase.publish('outage-1', 'during the outage');

        await start(brokerCase, async () => void counts.handlerCalls++, {
          idempotency: createIdempotency({ store: outageStore, leaseMs: 10_000 }),
          name: worker,
          maxDeliveries: 2,
          minRetryDelay: '100ms',
          maxRetryDelay: '300ms',
          hooks: {
            ...hooks,
            onRetry: (event) => {
              if (event.reason === 'store_unavailable') unavailable++;
            },
          },
        });
        // Fail closed: nothing runs while the store cannot be reached, and the message keeps coming back
        // (more deliveries than maxDeliveries: an outage is not the message's fault).
        await waitUntil('three redeliveries for store_unavailable', () => unavailable >= 3);
        expect(counts.handlerCalls).toBe(0);
        expect(counts.deadLetter).toBe(0);

        proxy.restore();
        await waitUntil('the execution once the store is back', () => counts.executed === 1);
        expect(counts.handlerCalls).toBe(1);
        expect(counts.deadLetter).toBe(0);
        expect(await brokerCase.deadLetters()).toHaveLength(0);
        // The completion is durable in the real server, under the consumer's scope.
        const storageKey = engine().storageKeyFor('outage-1', `consumer:${worker}`);
        expect((await store.get(storageKey))?.status).toBe('completed');
        await sleep(300);
        expect(counts.handlerCalls).toBe(1);
      });
    });

    it("redelivers later a handler that rethrows its step's store failure: never dead-lettered, the charge replayed", async () => {
      const { brokerCase, worker } = await newCase('step-outage');
      const { counts, hooks } = tally();
      await withStoreOutage(async ({ proxy, outageStore }) => {
        const unavailable: unknown[] = [];
        let charges = 0;
        let ships = 0;
        await brokerCase.publish('step-outage-1', 'work');

        await start(
          brokerCase,
          async (_message, context) => {
            counts.handlerCalls++;
            await context.step('charge', () => ++charges);
            // The link goes down while `ship` runs: its result cannot be recorded, and the handler
            // rethrows the step's StoreUnavailableError.
            await context.step('ship', () => {
              ships++;
              if (ships === 1) proxy.cut();
              return ships;
            });
          },
          {
            // A short lease: the claim is left to it (its recorded charge kept), and taken over after it.
            idempotency: createIdempotency({ store: outageStore, leaseMs: 2000 }),
            name: worker,
            // One delivery allowed: counted as a handler error, the first failure dead-lettered it.
            maxDeliveries: 1,
            minRetryDelay: '100ms',
            maxRetryDelay: '300ms',
            hooks: {
              ...hooks,
              onRetry: (event) => {
                if (event.reason === 'store_unavailable') unavailable.push(event.error);
              },
            },
          },
        );
        await waitUntil(
          'a redelivery for store_unavailable (or a dead letter)',
          () => unavailable.length >= 1 || counts.deadLetter > 0,
        );
        expect(counts.deadLetter).toBe(0);
        expect(isStoreUnavailableError(unavailable[0])).toBe(true);
        expect(String((unavailable[0] as Error).message)).toContain("failed to record step 'ship'");

        proxy.restore();
        await waitUntil(
          'the execution once the store is back and the lease ended',
          () => counts.executed === 1,
        );
        expect(counts.deadLetter).toBe(0);
        expect(await brokerCase.deadLetters()).toHaveLength(0);
        // The recorded charge was replayed on the takeover; `ship`, never recorded, ran again.
        expect(charges).toBe(1);
        expect(ships).toBe(2);
        await sleep(300);
        expect(counts.executed).toBe(1);
      });
    });

    it('fails closed on an engine shared with a route that fails open: no copy runs unprotected', async () => {
      const { brokerCase, worker } = await newCase('fail-open-engine');
      const { counts, hooks } = tally();
      await withStoreOutage(async ({ proxy, outageStore }) => {
        let unavailable = 0;
        proxy.cut();
        await brokerCase.publish('open-1', 'copy 1');
        await brokerCase.publish('open-1', 'copy 2');

        await start(brokerCase, async () => void counts.handlerCalls++, {
          // An HTTP route's choice (failOpen) must not make the worker run payments unprotected.
          idempotency: createIdempotency({ store: outageStore, leaseMs: 10_000, failOpen: true }),
          name: worker,
          minRetryDelay: '100ms',
          maxRetryDelay: '300ms',
          hooks: {
            ...hooks,
            onRetry: (event) => {
              if (event.reason === 'store_unavailable') unavailable++;
            },
          },
        });
        await waitUntil(
          'redeliveries for store_unavailable (or a run)',
          () => unavailable >= 4 || counts.handlerCalls > 0,
        );
        expect(counts.handlerCalls).toBe(0);
        expect(counts.executed + counts.duplicate).toBe(0);

        proxy.restore();
        await waitUntil('both copies settled', () => counts.executed + counts.duplicate === 2);
        expect(counts.handlerCalls).toBe(1);
        expect(counts.executed).toBe(1);
      });
    });

    it('lets a duplicate take over the key of a hung handler once maxExecution has passed', async () => {
      const { brokerCase, worker } = await newCase('hung');
      const run = tally();
      const { counts } = run;
      await brokerCase.publish('hung-1', 'copy 1');
      // Without maxExecution the hung execution's lease would be extended forever.
      await startHung(brokerCase, worker, run);
      await waitUntil('the hung handler to start', () => counts.handlerCalls === 1);
      await brokerCase.publish('hung-1', 'copy 2');
      await waitUntil('an in-progress redelivery of the copy', () => counts.inProgress > 0);
      await waitUntil('the takeover execution', () => counts.executed === 1, 10_000);
      expect(counts.handlerCalls).toBe(2);
      expect(counts.deadLetter).toBe(0);
    });

    // Only brokers whose delivery timer the consumer keeps alive (RabbitMQ has none to keep).
    if (broker !== 'amqp') {
      it('stops keeping a hung handler’s delivery alive after maxExecution: the broker redelivers it', async () => {
        const { brokerCase, worker } = await newCase('hung-timer');
        const run = tally();
        const { counts } = run;
        await brokerCase.publish('hung-2', 'only copy');
        await startHung(brokerCase, worker, run);
        // No duplicate is published: only the broker's own redelivery of the hung delivery can run it.
        await waitUntil('the redelivered message to run', () => counts.executed === 1, 15_000);
        expect(counts.handlerCalls).toBe(2);
        expect(counts.deadLetter).toBe(0);
      });

      it('keeps the delivery alive while its completion is retried through a store outage: no redelivery meanwhile', async () => {
        const { brokerCase, worker } = await newCase('complete-outage');
        const { counts, hooks } = tally();
        await withStoreOutage(async ({ proxy, outageStore }) => {
          const deliveries: number[] = [];
          let retries = 0;
          await start(
            brokerCase,
            (_message, context) => {
              counts.handlerCalls++;
              deliveries.push(context.deliveryCount);
              // The link to the store breaks once the handler ran: its completion is retried.
              proxy.cut();
            },
            {
              // The completion is retried for up to the lease (8 s), far past the broker's timer (1.5 s).
              idempotency: createIdempotency({ store: outageStore, leaseMs: 8000 }),
              name: worker,
              minRetryDelay: '100ms',
              maxRetryDelay: '300ms',
              hooks: { ...hooks, onRetry: () => void retries++ },
            },
          );
          await brokerCase.publish('complete-outage-1', 'work');
          await waitUntil('the handler to run', () => counts.handlerCalls === 1);
          // Two and a half broker timers (ack_wait / minIdle) into the outage: a delivery no longer kept
          // alive would have come back by now, as a store_unavailable retry.
          await sleep(BROKER_TIMING.natsAckWaitMs * 2.5);
          expect(retries).toBe(0);
          expect(counts.executed).toBe(0);

          proxy.restore();
          await waitUntil('the ack once the completion is durable', () => counts.executed === 1);
          await sleep(BROKER_TIMING.natsAckWaitMs + 500);
          expect(retries).toBe(0);
          expect(deliveries).toEqual([1]);
          expect(counts.executed + counts.duplicate).toBe(1);
          expect(counts.deadLetter).toBe(0);
        });
      });
    }

    it('close() during a store outage after the handler ran: bounded by drainTimeout, never acks before the completion is durable', async () => {
      const { brokerCase, worker } = await newCase('close-outage');
      const { counts, hooks } = tally();
      await withStoreOutage(async ({ proxy, outageStore }) => {
        const storageKey = engine().storageKeyFor('close-outage-1', `consumer:${worker}`);
        let completedWhenAcked: unknown = 'not acked';
        const consumer = await start(
          brokerCase,
          () => {
            counts.handlerCalls++;
            // The link to the store breaks once the handler ran: its completion cannot be written.
            proxy.cut();
          },
          {
            // The engine retries the completion for the whole lease (6 s), far past drainTimeout.
            idempotency: createIdempotency({ store: outageStore, leaseMs: 6000 }),
            name: worker,
            drainTimeout: '1s',
            hooks,
          },
        );
        await brokerCase.publish('close-outage-1', 'work');
        await waitUntil('the handler to run', () => counts.handlerCalls === 1);

        const begun = performance.now();
        const drained = await consumer.close();
        const elapsed = performance.now() - begun;
        // Bounded by drainTimeout (1 s), not by the completion's retries (the lease, 6 s); nothing acked.
        expect(drained).toBe(false);
        expect(elapsed).toBeLessThan(2000);
        expect(counts.executed).toBe(0);
        expect(await brokerCase.unacked()).toBe(1);

        // The store comes back within the lease: the completion retried after close() is written, and
        // only then is the message acked, once; the handler never runs again. Seen at the broker, the
        // record read once the ack is: no hook is called once close() resolved, onExecuted included.
        proxy.restore();
        await waitUntil('the ack once the completion is durable', async () => {
          if ((await brokerCase.unacked()) > 0) return false;
          completedWhenAcked = (await store.get(storageKey))?.status;
          return true;
        });
        expect(completedWhenAcked).toBe('completed');
        await sleep(300);
        expect(await brokerCase.unacked()).toBe(0);
        expect(counts.handlerCalls).toBe(1);
        // Acked after close() resolved false: reported to no hook (before, onExecuted fired then).
        expect(counts.executed + counts.duplicate).toBe(0);
      });
    });

    // Store calls that never answer (a store without timeouts of its own, a hung connection): each such
    // delivery used to hold its handler slot until close(), and with every slot held the consumer stopped.
    // Each consumer here runs with `lease: '1s'` and no `storeTimeout`: the default bound, the lease.
    describe('store calls that never answer', () => {
      function hungOptions(
        worker: string,
        events: HungEvents,
        idempotency: Idempotency,
      ): StartOptions {
        return {
          idempotency,
          name: worker,
          lease: '1s',
          concurrency: 2,
          drainTimeout: '5s',
          minRetryDelay: '100ms',
          maxRetryDelay: '300ms',
          backoff: { initial: '100ms', max: '300ms' },
          hooks: {
            onExecuted: (event: { key: string | undefined }) =>
              void events.executed.push(event.key),
            onDuplicate: (event: { key: string | undefined }) =>
              void events.duplicates.push(event.key),
            onRetry: (event: { key: string | undefined; reason: string; error?: unknown }) =>
              void events.retries.push({
                key: event.key,
                reason: event.reason,
                error: event.error,
              }),
            onDeadLetter: () => void events.deadLetters++,
            onBrokerError: (event: {
              key: string | undefined;
              operation: string;
              error: unknown;
            }) => void events.brokerErrors.push(event),
          },
        };
      }

      it('hands back a delivery whose claim never answers, freeing its slot: with every slot held, later messages still run', async () => {
        const { brokerCase, worker } = await newCase('hung-claim');
        const held = heldStore(store);
        const events = hungEvents();
        held.hold('claim', true);
        const consumer = await start(
          brokerCase,
          (_message, context) => void events.calls.push(context.key),
          hungOptions(worker, events, createIdempotency({ store: held.store, leaseMs: 1000 })),
        );
        // Two hung claims hold both slots (concurrency 2).
        await brokerCase.publish('hung-claim-1', 'a');
        await brokerCase.publish('hung-claim-2', 'b');
        await waitUntil('both claims to be held', () => held.held('claim') >= 2, 10_000);
        held.hold('claim', false);
        for (const key of ['free-1', 'free-2', 'free-3']) await brokerCase.publish(key, 'c');

        // Before, nothing else ever ran: both slots stayed held by claims that never answer.
        await waitUntil('all five messages to run', () => events.executed.length === 5, 20_000);
        expect([...events.calls].sort()).toEqual(
          ['free-1', 'free-2', 'free-3', 'hung-claim-1', 'hung-claim-2'].sort(),
        );
        // Handed back as a store-unavailable redelivery, with the key and a StoreUnavailableError.
        for (const key of ['hung-claim-1', 'hung-claim-2']) {
          const given = events.retries.filter(
            (r) => r.key === key && r.reason === 'store_unavailable',
          );
          expect(given.length).toBeGreaterThanOrEqual(1);
          expect(isStoreUnavailableError(given[0]?.error)).toBe(true);
        }
        // The late replies meet the completed records: nothing runs again.
        while (held.held('claim') > 0) await held.answerOldest('claim');
        await sleep(300);
        expect(events.calls).toHaveLength(5);
        expect(events.deadLetters).toBe(0);
        // Nothing is left in flight: close() drains at once.
        expect(await consumer.close()).toBe(true);
      });

      it('releases a claim answered after the delivery was handed back, never running its handler', async () => {
        const { brokerCase, worker } = await newCase('late-claim');
        const held = heldStore(store);
        const events = hungEvents();
        // What the engine's own hooks (metrics) see of the late claim.
        const engineEvents = {
          failed: 0,
          storeErrors: [] as Array<{ operation: string; error: unknown }>,
        };
        const idempotency = createIdempotency({
          store: held.store,
          leaseMs: 1000,
          hooks: {
            onFailed: () => void engineEvents.failed++,
            onStoreError: (event) => void engineEvents.storeErrors.push(event),
          },
        });
        const storageKey = idempotency.storageKeyFor('late-claim-1', `consumer:${worker}`);
        held.hold('claim', true);
        await start(
          brokerCase,
          (_message, context) => void events.calls.push(context.key),
          hungOptions(worker, events, idempotency),
        );
        await brokerCase.publish('late-claim-1', 'a');
        await waitUntil(
          'the delivery to be handed back',
          () => events.retries.some((r) => r.reason === 'store_unavailable'),
          10_000,
        );
        // The first claim answers now, late: it claims the key, for a delivery already handed back.
        const answer = (await held.answerOldest('claim')) as { claimed: boolean };
        expect(answer.claimed).toBe(true);
        // Released at once (best effort), not run.
        await waitUntil(
          'the late claim to be released',
          async () => (await store.get(storageKey)) === undefined,
          10_000,
        );
        expect(events.calls).toHaveLength(0);
        expect(held.made('release')).toBe(1);
        // Reported as the slow claim it was, not as a handler that failed (before: onFailed, counted by
        // metrics users alerting on handler failures, for a handler that never ran).
        expect(engineEvents.failed).toBe(0);
        expect(engineEvents.storeErrors.map((event) => event.operation)).toEqual(['claim']);
        expect(isStoreUnavailableError(engineEvents.storeErrors[0]?.error)).toBe(true);

        // The store answers again: a redelivery runs the message, once.
        held.hold('claim', false);
        while (held.held('claim') > 0) await held.answerOldest('claim');
        await waitUntil('the message to run', () => events.executed.length === 1, 20_000);
        await sleep(300);
        expect(events.calls).toEqual(['late-claim-1']);
        expect((await store.get(storageKey))?.status).toBe('completed');
      });

      it('hands back a delivery whose completion never answers once the lease and storeTimeout passed: never acked, its slot freed', async () => {
        const { brokerCase, worker } = await newCase('hung-completion');
        const held = heldStore(store);
        const events = hungEvents();
        const idempotency = createIdempotency({ store: held.store, leaseMs: 1000 });
        const storageKey = idempotency.storageKeyFor('hung-completion-1', `consumer:${worker}`);
        held.hold('complete', true);
        await start(brokerCase, (_message, context) => void events.calls.push(context.key), {
          ...hungOptions(worker, events, idempotency),
          concurrency: 1,
        });
        await brokerCase.publish('hung-completion-1', 'a');
        await waitUntil('the completion to be held', () => held.held('complete') === 1, 10_000);
        held.hold('complete', false);
        await brokerCase.publish('after-completion-1', 'b');

        // Before, the one slot stayed held: the next message never ran (RabbitMQ: never redelivered).
        await waitUntil(
          'the next message to run',
          () => events.executed.includes('after-completion-1'),
          20_000,
        );
        const given = events.retries.filter(
          (r) => r.key === 'hung-completion-1' && r.reason === 'store_unavailable',
        );
        expect(given.length).toBeGreaterThanOrEqual(1);
        expect(isStoreUnavailableError(given[0]?.error)).toBe(true);
        // The redelivery met the claim, its lease over and no completion written: it took the key over
        // and ran it again, as after a crash, and only then was it acked.
        await waitUntil(
          'the handed-back message to run again',
          () => events.executed.includes('hung-completion-1'),
          20_000,
        );
        expect(events.calls.filter((key) => key === 'hung-completion-1')).toHaveLength(2);
        expect((await store.get(storageKey))?.status).toBe('completed');
        // The first completion, answered late, is fenced out: the record stays the takeover's.
        expect(await held.answerOldest('complete')).toBe(false);
        await sleep(300);
        expect(events.executed.filter((key) => key === 'hung-completion-1')).toHaveLength(1);
        expect(events.deadLetters).toBe(0);
      });

      // RabbitMQ reads and writes dead-letter records only for its own retry copies once requeued; a first
      // delivery, and a retry copy as first delivered, have none.
      if (broker !== 'amqp') {
        it('hands back a redelivery whose dead-letter record cannot be read in time, and runs it once the store answers', async () => {
          const { brokerCase, worker } = await newCase('hung-letter-read');
          const held = heldStore(store);
          const events = hungEvents();
          let failures = 0;
          await start(
            brokerCase,
            (_message, context) => {
              events.calls.push(context.key);
              if (failures++ > 0) return;
              // The first run fails; the redelivery reads its dead-letter record, which never answers.
              held.hold('inspect', true);
              throw new Error('boom');
            },
            {
              ...hungOptions(
                worker,
                events,
                createIdempotency({ store: held.store, leaseMs: 1000 }),
              ),
              concurrency: 1,
            },
          );
          await brokerCase.publish('hung-letter-read-1', 'a');
          await waitUntil('the read to be held', () => held.held('inspect') >= 1, 10_000);
          held.hold('inspect', false);
          await brokerCase.publish('after-letter-read-1', 'b');

          // Before, the one slot stayed held by the unanswered read: nothing else ran.
          await waitUntil(
            'the next message to run',
            () => events.executed.includes('after-letter-read-1'),
            20_000,
          );
          expect(
            events.retries.some(
              (r) => r.reason === 'store_unavailable' && isStoreUnavailableError(r.error),
            ),
          ).toBe(true);
          await waitUntil(
            'the handed-back message to run',
            () => events.executed.includes('hung-letter-read-1'),
            20_000,
          );
          expect(events.calls.filter((key) => key === 'hung-letter-read-1')).toHaveLength(2);
          expect(events.deadLetters).toBe(0);
        });

        it('writes a dead letter whose record never answers, reported, and frees the slot', async () => {
          const { brokerCase, worker } = await newCase('hung-letter-record');
          const held = heldStore(store);
          const events = hungEvents();
          await start(
            brokerCase,
            (_message, context) => {
              events.calls.push(context.key);
              if (context.key !== 'hung-letter-record-1') return;
              // Claims from now on never answer: the dead letter's record is one.
              held.hold('claim', true);
              throw new Error('permanent');
            },
            {
              ...hungOptions(
                worker,
                events,
                createIdempotency({ store: held.store, leaseMs: 1000 }),
              ),
              concurrency: 1,
              isPermanentError: () => true,
            },
          );
          await brokerCase.publish('hung-letter-record-1', 'a');
          await waitUntil('the record to be held', () => held.held('claim') >= 1, 10_000);
          held.hold('claim', false);
          await brokerCase.publish('after-letter-record-1', 'b');

          // Before, the one slot stayed held by the unanswered record: no letter, nothing else ran.
          await waitUntil(
            'the next message to run',
            () => events.executed.includes('after-letter-record-1'),
            20_000,
          );
          expect(events.deadLetters).toBe(1);
          const reported = events.brokerErrors.filter(
            (e) => e.key === 'hung-letter-record-1' && e.operation === 'dead_letter',
          );
          expect(reported).toHaveLength(1);
          expect(isStoreUnavailableError(reported[0]?.error)).toBe(true);
          const letters = await brokerCase.deadLetters();
          expect(letters.map((letter) => letter.key)).toEqual(['hung-letter-record-1']);
          expect(events.calls.filter((key) => key === 'hung-letter-record-1')).toHaveLength(1);
        });
      }

      it('frees the slot of a failed handler whose release never answers, and retries the message', async () => {
        const { brokerCase, worker } = await newCase('hung-release');
        const held = heldStore(store);
        const events = hungEvents();
        held.hold('release', true);
        let failures = 0;
        await start(
          brokerCase,
          (_message, context) => {
            events.calls.push(context.key);
            if (context.key === 'hung-release-1' && failures++ === 0) throw new Error('boom');
          },
          {
            ...hungOptions(worker, events, createIdempotency({ store: held.store, leaseMs: 1000 })),
            concurrency: 1,
          },
        );
        await brokerCase.publish('hung-release-1', 'a');
        await waitUntil('the release to be held', () => held.held('release') === 1, 10_000);
        held.hold('release', false);
        await brokerCase.publish('after-release-1', 'b');

        await waitUntil(
          'the next message to run',
          () => events.executed.includes('after-release-1'),
          20_000,
        );
        // Reported with the key, and retried as the handler error it is.
        const reported = events.brokerErrors.filter(
          (e) => e.key === 'hung-release-1' && e.operation === 'release',
        );
        expect(reported).toHaveLength(1);
        expect(isStoreUnavailableError(reported[0]?.error)).toBe(true);
        expect(
          events.retries.some((r) => r.key === 'hung-release-1' && r.reason === 'handler_error'),
        ).toBe(true);
        // The redelivery waits out the unreleased claim's lease, then runs: twice in all, once successfully.
        await waitUntil(
          'the retried message to run',
          () => events.executed.includes('hung-release-1'),
          20_000,
        );
        expect(events.calls.filter((key) => key === 'hung-release-1')).toHaveLength(2);
        expect(events.deadLetters).toBe(0);
      });
    });

    it('drains in-flight messages on close before resolving', async () => {
      const { brokerCase, worker } = await newCase('drain');
      const { counts, hooks } = tally();
      let started = false;
      await brokerCase.publish('slow-1', 'work');
      const consumer = await start(
        brokerCase,
        async () => {
          started = true;
          await sleep(500);
          counts.handlerCalls++;
        },
        { idempotency: engine(), name: worker, hooks },
      );
      await waitUntil('the handler to start', () => started);

      const drained = await consumer.close();

      expect(drained).toBe(true);
      expect(counts.handlerCalls).toBe(1);
      expect(counts.executed).toBe(1);
    });
  });
}
