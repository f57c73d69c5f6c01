/**
 * A handler that rethrows the StoreUnavailableError a step threw (the store failed under `saveStep` or
 * `loadSteps`) was settled as a handler error: with the store down, every delivery of the message counted
 * toward `maxDeliveries` and the message was dead-lettered, although it would have run once the store came
 * back. It is now the store outage it is: redelivered later, never dead-lettered for it, as when the claim
 * itself fails. A StoreUnavailableError of the handler's own making is still a handler error.
 */
import { describe, expect, it } from 'vitest';
import {
  type ConsumerContext,
  type DeadLetter,
  type Delivery,
  processDelivery,
  resolveConsumerOptions,
} from '../../../src/consumer/index.js';
import {
  createIdempotency,
  memoryStore,
  type Store,
  StoreUnavailableError,
} from '../../../src/index.js';
import { ManualClock } from '../../helpers/clock.js';

interface Message {
  id: string;
}

const LEASE_MS = 10_000;

type Action =
  | { op: 'ack' }
  | { op: 'retry'; delayMs: number }
  | { op: 'dead_letter'; letter: DeadLetter };

/** Deliver `message` (its `deliveryCount`th delivery) and say what was done with it. */
async function deliver(
  options: ReturnType<typeof resolveConsumerOptions<Message>>,
  handler: (message: Message, ctx: ConsumerContext) => unknown,
  deliveryCount: number,
): Promise<Action[]> {
  const actions: Action[] = [];
  const delivery: Delivery<Message> = {
    message: { id: 'order-1' },
    deliveryCount,
    ack: () => void actions.push({ op: 'ack' }),
    retry: (delayMs) => void actions.push({ op: 'retry', delayMs }),
    deadLetter: (letter) => void actions.push({ op: 'dead_letter', letter }),
  };
  await processDelivery(options, handler, delivery);
  return actions;
}

/** A consumer (`maxDeliveries: 1`) on a memory store whose `operation` fails while `down` is set. */
function setup(operation: 'saveStep' | 'loadSteps') {
  const clock = new ManualClock();
  const inner = memoryStore({ clock });
  const state = { down: false };
  const store: Store = {
    ...inner,
    saveStep: async (key, token, name, result) => {
      // Applied, then its answer lost: the charge is on the record all the same.
      const saved = await inner.saveStep(key, token, name, result);
      if (operation === 'saveStep' && state.down) throw new Error('saveStep: connection reset');
      return saved;
    },
    loadSteps: async (key, token) => {
      if (operation === 'loadSteps' && state.down) throw new Error('loadSteps: connection reset');
      return inner.loadSteps(key, token);
    },
  };
  const idempotency = createIdempotency({ store, clock, extendLease: false, leaseMs: LEASE_MS });
  const options = resolveConsumerOptions<Message>(
    { idempotency, name: 'billing', maxDeliveries: 1, backoff: () => 300 },
    (message) => message.id,
  );
  let charges = 0;
  const handler = async (_message: Message, ctx: ConsumerContext) => {
    await ctx.step('charge', () => `ch_${++charges}`);
  };
  return { clock, idempotency, options, state, handler, charges: () => charges };
}

describe('a consumer whose handler rethrows the StoreUnavailableError of a step', () => {
  it('redelivers the message later when saveStep failed, never dead-letters it, and then replays the charge', async () => {
    // Arrange
    const { clock, options, state, handler, charges } = setup('saveStep');
    state.down = true;

    // Act: the outage, a redelivery behind the claim left to its lease, then one after it, store back.
    const during = await deliver(options, handler, 1);
    const behind = await deliver(options, handler, 2);
    state.down = false;
    clock.advance(LEASE_MS + 1);
    const after = await deliver(options, handler, 3);

    // Assert
    expect(during).toEqual([{ op: 'retry', delayMs: 1000 }]);
    expect(behind).toMatchObject([{ op: 'retry' }]);
    expect(after).toEqual([{ op: 'ack' }]);
    expect(charges()).toBe(1);
  });

  it("redelivers the message later when a takeover's loadSteps failed", async () => {
    // Arrange: a delivery records its charge and dies; its lease ends; the store then fails.
    const { clock, idempotency, options, state, handler, charges } = setup('loadSteps');
    let recorded!: () => void;
    const charged = new Promise<void>((resolve) => {
      recorded = resolve;
    });
    void idempotency.run({ key: 'order-1', scope: 'consumer:billing' }, async (ctx) => {
      await ctx.step('charge', () => 'ch_1');
      recorded();
      return new Promise(() => {});
    });
    await charged;
    clock.advance(LEASE_MS + 1);
    state.down = true;

    // Act
    const during = await deliver(options, handler, 2);
    state.down = false;
    clock.advance(LEASE_MS + 1);
    const after = await deliver(options, handler, 3);

    // Assert
    expect(during).toEqual([{ op: 'retry', delayMs: 1000 }]);
    expect(after).toEqual([{ op: 'ack' }]);
    expect(charges()).toBe(0);
  });

  it("still counts the handler's own StoreUnavailableError as a handler failure after a step's failed", async () => {
    // Arrange: the step's store call fails; the handler throws a StoreUnavailableError of its own.
    const { options, state } = setup('saveStep');
    state.down = true;
    const handler = async (_message: Message, ctx: ConsumerContext) => {
      await ctx
        .step('charge', () => 'ch_1')
        .catch(() => {
          throw new StoreUnavailableError('the handler’s own database');
        });
    };

    // Act
    const actions = await deliver(options, handler, 1);

    // Assert
    expect(actions).toMatchObject([{ op: 'dead_letter', letter: { reason: 'handler_error' } }]);
  });
});
