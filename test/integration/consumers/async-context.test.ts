/**
 * `asyncContext: true` on the idempotent consumers (RabbitMQ, NATS JetStream, Redis Streams), on the real
 * brokers: `currentIdempotency()` in a handler's call tree is the handler's own context with the
 * consumer's scope, per delivery with several in flight, and nothing after the handler; a consumer
 * without the option gives none, even when started under an HTTP request's context.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ConsumerContext,
  consumerScope,
  currentIdempotency,
  type IdempotencyContext,
} from '../../../src/consumer/index.js';
import { enableAsyncContext, runWithContext } from '../../../src/http/context.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  type BrokerCase,
  type BrokerName,
  openBrokerCase,
  type RunningConsumer,
} from '../../helpers/consumer-brokers.js';
import { env, requireService } from '../../helpers/env.js';
import { waitUntil } from '../../helpers/wait-until.js';

const SERVICE: Record<BrokerName, [string, string]> = {
  amqp: ['RabbitMQ', env.amqpUrl],
  nats: ['NATS', env.natsUrl],
  'redis-streams': ['Redis', env.redisUrl],
};

/** An HTTP request's context, as a consumer started by a request handler would run under. */
const REQUEST_CONTEXT = {
  key: 'http-request-key',
  scope: 'http-request-scope',
  storageKey: 'http-request-storage-key',
  downstreamKey: (step: string) => `http-request:${step}`,
} as unknown as IdempotencyContext;

/** What a helper shared with HTTP routes sees, read after an await deep in the handler's call tree. */
async function sharedHelper(): Promise<IdempotencyContext | undefined> {
  await sleep(1);
  return currentIdempotency();
}

describe.each<BrokerName>(['amqp', 'nats', 'redis-streams'])(
  'asyncContext on the %s consumer',
  (broker) => {
    const run = randomUUID().slice(0, 8);
    const cases: BrokerCase[] = [];
    const consumers: RunningConsumer[] = [];

    async function open(name: string): Promise<BrokerCase> {
      const kase = await openBrokerCase(broker, `conctx-${name}-${run}`);
      cases.push(kase);
      return kase;
    }

    beforeAll(async () => {
      await requireService(...SERVICE[broker]);
    });

    afterAll(async () => {
      for (const consumer of consumers) await consumer.close().catch(() => {});
      for (const kase of cases) await kase.destroy().catch(() => {});
    });

    it("gives each handler's call tree its own context, with several deliveries in flight and none after", async () => {
      const kase = await open('own');
      const store = memoryStore();
      const name = `conctx-own-${broker}-${run}`;
      const keys = Array.from({ length: 8 }, (_, i) => `conctx-${run}-${i}`);
      for (const key of keys) await kase.publish(key, key);
      let inFlight = 0;
      let mostInFlight = 0;
      const seen: Array<{ context: ConsumerContext; current: IdempotencyContext | undefined }> = [];
      const afterHandler: unknown[] = [];
      const leftRunning: Array<[string, string | undefined]> = [];
      const problems: unknown[] = [];
      const handler = async (_message: unknown, context: ConsumerContext) => {
        inFlight++;
        mostInFlight = Math.max(mostInFlight, inFlight);
        try {
          // The first delivery is held until another is in flight too (or a while passed), so that
          // contexts overlap for sure.
          await waitUntil('two deliveries in flight', () => mostInFlight > 1, 5_000, 10).catch(
            () => {},
          );
          const current = await sharedHelper();
          if (current !== undefined) {
            // The real lease: its record is this execution's claim, and extending it works.
            const record = await store.get(current.storageKey);
            if (record?.status !== 'in_progress' || record.token !== context.token) {
              problems.push({ key: context.key, record });
            }
            await current.extendLease('20s');
            const stepped = await current.step('stepped', ({ downstreamKey }) => downstreamKey);
            if (stepped !== context.downstreamKey('stepped')) problems.push({ stepped });
          }
          seen.push({ context, current });
          // Work the handler leaves running keeps its context.
          setTimeout(() => leftRunning.push([context.key, currentIdempotency()?.key]), 20);
        } finally {
          inFlight--;
        }
      };
      // Started under a request's context: the consumer's own must win in the handler.
      const consumer = await runWithContext(REQUEST_CONTEXT, () =>
        kase.start(handler, {
          idempotency: createIdempotency({ store }),
          name,
          concurrency: 4,
          asyncContext: true,
          hooks: { onExecuted: () => void afterHandler.push(currentIdempotency()) },
        }),
      );
      consumers.push(consumer);
      await waitUntil('every message acked', () => afterHandler.length === keys.length, 30_000, 25);

      await waitUntil(
        'the timers left running',
        () => leftRunning.length === keys.length,
        10_000,
        25,
      );
      expect(problems).toEqual([]);
      for (const [key, seenKey] of leftRunning) expect(seenKey).toBe(key);
      expect(mostInFlight).toBeGreaterThan(1);
      expect(seen.map(({ context }) => context.key).sort()).toEqual([...keys].sort());
      for (const { context, current } of seen) {
        expect(current, `context of ${context.key}`).toBeDefined();
        expect(current!.key).toBe(context.key);
        expect(current!.scope).toBe(consumerScope(name));
        expect(current!.token).toBe(context.token);
        expect(current!.attempt).toBe(context.attempt);
        expect(current!.downstreamKey('publish')).toBe(context.downstreamKey('publish'));
        expect(current!.signal).toBe(context.signal);
        expect(current!.extendLease).toBe(context.extendLease);
        expect(current!.step).toBe(context.step);
      }
      // The settle and the hooks after the handler see no delivery's context: only the handler's call is
      // given its own, the rest stays in what the consumer was started under.
      expect(afterHandler).toEqual(keys.map(() => REQUEST_CONTEXT));
    });

    it("gives a handler no context without the option, even under a request's", async () => {
      // As when an HTTP route of the process has `asyncContext: true`.
      enableAsyncContext();
      const kase = await open('off');
      const seen: Array<IdempotencyContext | undefined | 'unset'> = [];
      const consumer = await runWithContext(REQUEST_CONTEXT, () =>
        kase.start(async () => void seen.push(await sharedHelper()), {
          idempotency: createIdempotency({ store: memoryStore() }),
          name: `conctx-off-${broker}-${run}`,
        }),
      );
      consumers.push(consumer);
      await kase.publish(`conctx-off-${run}`, 'x');
      await waitUntil('the message handled', () => seen.length > 0, 30_000, 25);
      expect(seen).toEqual([undefined]);
    });

    it('refuses an asyncContext that is not a boolean, as the HTTP middleware does', async () => {
      const kase = await open('invalid');
      await expect(
        kase.start(() => {}, {
          idempotency: createIdempotency({ store: memoryStore() }),
          name: `conctx-invalid-${broker}-${run}`,
          asyncContext: 'yes' as unknown as boolean,
        }),
      ).rejects.toThrow(/asyncContext: expected true or false/);
    });
  },
);
