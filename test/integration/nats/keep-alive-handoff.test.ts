/**
 * `working()` across a delivery's hand-offs, against a real NATS server: the waiting queue's keep-alive
 * stopped as the message left it, the claim phase's as the handler started, and the next one (the claim
 * phase's, the handler's) sent its first `working()` a full interval after its own start. The gap between
 * two touches reached about the claim's time plus an interval (up to three intervals, through the queue),
 * so a legal `workingInterval` above half of `ack_wait` let the server redeliver the message while this
 * process held it, each copy counting toward `maxDeliveries` (met in progress and `nak()`ed). Now each
 * keep-alive starts from the last touch of the one before it.
 */
import type { JsMsg } from '@nats-io/jetstream';
import { afterAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore, type Store } from '../../../src/index.js';
import { idempotentConsumer, type NatsConsumerOptions } from '../../../src/nats/index.js';
import { waitUntil } from '../../helpers/wait-until.js';
import { type NatsFixture, natsFixture } from './setup.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ack_wait 2 s and a touch every 1.2 s (legal: shorter than ack_wait). A claim answered 1.1 s late never
// sees the claim phase touch, so the handler's first touch came 1.1 + 1.2 = 2.3 s after the delivery (or
// the queue's last touch): 300 ms past ack_wait. Now the touches stay 1.2 s apart, 800 ms inside it.
const ACK_WAIT_MS = 2_000;
const WORKING_MS = 1_200;
const CLAIM_LATE_MS = 1_100;

/** A memory store whose every claim is made at once but answered {@link CLAIM_LATE_MS} later. */
function claimsLate(): Store {
  const inner = memoryStore();
  const store = Object.create(inner) as Store;
  // One claim per delivery, none batched.
  Object.defineProperty(store, 'capabilities', { value: { ...inner.capabilities, batch: false } });
  Object.defineProperty(store, 'claimMany', { value: undefined });
  store.claim = async (...args: Parameters<Store['claim']>) => {
    const answer = await inner.claim(...args);
    await sleep(CLAIM_LATE_MS);
    return answer;
  };
  return store;
}

describe('NATS consumer: working() across the hand-offs of a delivery', () => {
  const fixtures: NatsFixture[] = [];

  afterAll(async () => {
    for (const f of fixtures) await f.destroy();
  });

  /** A consumer on a fresh fixture whose handler records its run, then takes `handlerMs`. */
  async function handoffConsumer(
    label: string,
    handlerMs: number,
    seen: string[],
    extra: Partial<NatsConsumerOptions> = {},
  ) {
    const f = await natsFixture(`handoff-${label}`, ACK_WAIT_MS);
    fixtures.push(f);
    const consumer = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      async (message) => {
        seen.push(`run ${(message as JsMsg).info.deliveryCount}`);
        await sleep(handlerMs);
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store: claimsLate() }),
        workingInterval: WORKING_MS,
        maxDeliveries: 3,
        backoff: () => 50,
        minRetryDelay: '50ms',
        maxRetryDelay: '100ms',
        hooks: {
          onExecuted: (event) => void seen.push(`executed ${event.deliveryCount}`),
          onRetry: (event) => void seen.push(`retry ${event.reason} ${event.deliveryCount}`),
        },
        ...extra,
      },
    );
    return { f, consumer };
  }

  /** Wait until `done` holds and nothing is pending, then past `ack_wait`; how many deliveries in all. */
  async function deliveriesOnceSettled(f: NatsFixture, done: () => boolean): Promise<number> {
    await waitUntil('the messages to settle', done, 30_000);
    await waitUntil(
      'nothing pending',
      async () => (await f.jsm.consumers.info(f.stream, f.durable)).num_ack_pending === 0,
      30_000,
    );
    await sleep(ACK_WAIT_MS + 500);
    return (await f.jsm.consumers.info(f.stream, f.durable)).delivered.consumer_seq;
  }

  it('keeps touching from the claim phase into the handler', async () => {
    // Arrange: a handler running past two intervals; a second slot, so that a redelivery runs at once.
    const seen: string[] = [];
    const { f, consumer } = await handoffConsumer('claim', 3_000, seen, { concurrency: 2 });

    // Act
    await f.publish('pay-handoff-claim');
    const deliveries = await deliveriesOnceSettled(f, () => seen.includes('executed 1'));

    // Assert: before, the server redelivered it before the handler's first touch, and the copy was met
    // in progress (`retry in_progress 2`), then again (`retry in_progress 3`).
    expect(seen).toEqual(['run 1', 'executed 1']);
    expect(deliveries).toBe(1);
    expect(await consumer.close()).toBe(true);
  });

  it('keeps touching from the waiting queue into the claim phase and the handler', async () => {
    // Arrange: one slot; the second message waits in the queue while the first one's claim and handler
    // run (about 1.1 + 1.5 s), touched there, then goes through its own claim to its handler.
    const seen: string[] = [];
    const { f, consumer } = await handoffConsumer('waiting', 1_500, seen, { concurrency: 1 });

    // Act
    await f.publish('pay-handoff-a');
    await f.publish('pay-handoff-b');
    const deliveries = await deliveriesOnceSettled(
      f,
      () => seen.filter((event) => event.startsWith('executed')).length === 2,
    );

    // Assert: before, the second message was redelivered between the queue's last touch and its
    // handler's first one (its copy met in progress, counting a delivery).
    expect(seen).toEqual(['run 1', 'executed 1', 'run 1', 'executed 1']);
    expect(deliveries).toBe(2);
    expect(await consumer.close()).toBe(true);
  });
});
