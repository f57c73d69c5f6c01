import { describe, expect, it } from 'vitest';
import {
  type ConsumerOptions,
  type DeadLetter,
  type Delivery,
  InFlight,
  processDelivery,
  resolveConsumerOptions,
} from '../../../src/consumer/index.js';
import {
  createIdempotency,
  isInvalidOptionsError,
  memoryStore,
  type Store,
} from '../../../src/index.js';
import { ManualClock } from '../../helpers/clock.js';

interface Message {
  id?: string;
  body: string;
}

/** A delivery that records what the runner did with it (no broker). */
function fakeDelivery(message: Message, deliveryCount = 1) {
  const actions: Array<
    { op: 'ack' } | { op: 'retry'; delayMs: number } | { op: 'dead_letter'; letter: DeadLetter }
  > = [];
  const delivery: Delivery<Message> = {
    message,
    deliveryCount,
    ack: () => void actions.push({ op: 'ack' }),
    retry: (delayMs) => void actions.push({ op: 'retry', delayMs }),
    deadLetter: (letter) => void actions.push({ op: 'dead_letter', letter }),
  };
  return { delivery, actions };
}

function setup(overrides: Partial<ConsumerOptions<Message>> = {}, store: Store = memoryStore()) {
  const clock = new ManualClock();
  const idempotency = createIdempotency({ store, clock, extendLease: false, leaseMs: 10_000 });
  const options = resolveConsumerOptions<Message>(
    { idempotency, name: 'billing', maxDeliveries: 2, backoff: () => 300, ...overrides },
    (message) => message.id,
  );
  return { idempotency, options, clock };
}

describe('processDelivery', () => {
  it('runs the handler once and acks every copy of one key', async () => {
    // Arrange
    const { options } = setup();
    let calls = 0;
    const first = fakeDelivery({ id: 'k1', body: 'a' });
    const second = fakeDelivery({ id: 'k1', body: 'a' });
    // Act
    await processDelivery(options, () => void calls++, first.delivery);
    await processDelivery(options, () => void calls++, second.delivery);
    // Assert
    expect(calls).toBe(1);
    expect(first.actions).toEqual([{ op: 'ack' }]);
    expect(second.actions).toEqual([{ op: 'ack' }]);
  });

  it('scopes keys by consumer name, so a record of another scope does not stop the worker', async () => {
    // Arrange
    const { options, idempotency } = setup();
    await idempotency.run({ key: 'k1' }, () => 'the API did this');
    let calls = 0;
    const { delivery } = fakeDelivery({ id: 'k1', body: 'a' });
    // Act
    await processDelivery(options, () => void calls++, delivery);
    // Assert
    expect(calls).toBe(1);
  });

  it('redelivers a copy while the first is in flight, without acking it', async () => {
    // Arrange
    const { options } = setup();
    let open!: () => void;
    const held = new Promise<void>((resolve) => {
      open = resolve;
    });
    const first = fakeDelivery({ id: 'k1', body: 'a' });
    const second = fakeDelivery({ id: 'k1', body: 'a' });
    // Act
    const running = processDelivery(options, () => held, first.delivery);
    await new Promise((resolve) => setImmediate(resolve));
    await processDelivery(options, () => {}, second.delivery);
    open();
    await running;
    // Assert
    expect(second.actions).toEqual([{ op: 'retry', delayMs: 100 }]);
    expect(first.actions).toEqual([{ op: 'ack' }]);
  });

  it('releases the claim on a handler error and retries, then dead-letters on the last delivery', async () => {
    // Arrange
    const { options } = setup();
    let calls = 0;
    const fail = () => {
      calls++;
      throw new Error('boom');
    };
    const first = fakeDelivery({ id: 'k1', body: 'a' }, 1);
    const last = fakeDelivery({ id: 'k1', body: 'a' }, 2);
    // Act
    await processDelivery(options, fail, first.delivery);
    await processDelivery(options, fail, last.delivery);
    // Assert
    expect(calls).toBe(2);
    expect(first.actions).toEqual([{ op: 'retry', delayMs: 300 }]);
    expect(last.actions).toMatchObject([
      {
        op: 'dead_letter',
        letter: {
          consumer: 'billing',
          key: 'k1',
          reason: 'handler_error',
          deliveryCount: 2,
          error: { message: 'boom' },
        },
      },
    ]);
  });

  it('dead-letters a message with no key without running the handler', async () => {
    // Arrange
    const { options } = setup();
    let calls = 0;
    const { delivery, actions } = fakeDelivery({ body: 'no id' });
    // Act
    await processDelivery(options, () => void calls++, delivery);
    // Assert
    expect(calls).toBe(0);
    expect(actions).toMatchObject([{ op: 'dead_letter', letter: { reason: 'invalid_key' } }]);
  });

  it('dead-letters a handler error as headers_too_large when the delivery cannot be retried', async () => {
    // Arrange: a delivery with deliveries left whose retry copy cannot be made (RabbitMQ: 64 KB headers).
    const { options } = setup();
    const { delivery, actions } = fakeDelivery({ id: 'k1', body: 'a' });
    let asked = 0;
    delivery.canRetry = () => {
      asked += 1;
      return false;
    };
    // Act
    const decision = await processDelivery(
      options,
      () => {
        throw new Error('gateway down');
      },
      delivery,
    );
    // Assert: the handler's error recorded, no retry attempted.
    expect(asked).toBe(1);
    expect(decision).toMatchObject({ action: 'dead_letter', reason: 'headers_too_large' });
    expect(actions).toMatchObject([
      {
        op: 'dead_letter',
        letter: {
          reason: 'headers_too_large',
          error: { message: 'gateway down' },
          deliveryCount: 1,
        },
      },
    ]);
  });

  it('still retries a delivery it cannot retry by copy when nothing final happened (store down)', async () => {
    // Arrange: the adapter hands such a message back another way (RabbitMQ: a delayed requeue).
    const refused = async (): Promise<never> => {
      throw new Error('ECONNREFUSED');
    };
    const down: Store = { ...memoryStore(), claim: refused, claimMany: refused };
    const { options } = setup({}, down);
    const { delivery, actions } = fakeDelivery({ id: 'k1', body: 'a' });
    delivery.canRetry = () => false;
    // Act
    await processDelivery(options, () => {}, delivery);
    // Assert
    expect(actions).toEqual([{ op: 'retry', delayMs: 1000 }]);
  });

  it('redelivers later, without running anything, when the store is down', async () => {
    // Arrange
    const refused = async (): Promise<never> => {
      throw new Error('ECONNREFUSED');
    };
    const down: Store = { ...memoryStore(), claim: refused, claimMany: refused };
    const { options } = setup({}, down);
    let calls = 0;
    const { delivery, actions } = fakeDelivery({ id: 'k1', body: 'a' }, 9);
    // Act
    await processDelivery(options, () => void calls++, delivery);
    // Assert
    expect(calls).toBe(0);
    expect(actions).toEqual([{ op: 'retry', delayMs: 1000 }]);
  });

  it('fails closed on an engine that fails open: no copy runs unprotected, none is acked', async () => {
    // Arrange: one engine shared with an HTTP route that opted into failOpen, its store down.
    const refused = async (): Promise<never> => {
      throw new Error('ECONNREFUSED');
    };
    const down: Store = { ...memoryStore(), claim: refused, claimMany: refused };
    const options = resolveConsumerOptions<Message>(
      {
        idempotency: createIdempotency({ store: down, failOpen: true, extendLease: false }),
        name: 'billing',
      },
      (message) => message.id,
    );
    let calls = 0;
    const copies = [fakeDelivery({ id: 'k1', body: 'a' }), fakeDelivery({ id: 'k1', body: 'a' })];
    // Act
    for (const { delivery } of copies) await processDelivery(options, () => void calls++, delivery);
    // Assert
    expect(calls).toBe(0);
    for (const { actions } of copies) expect(actions).toMatchObject([{ op: 'retry' }]);
  });

  it("counts a handler's own StoreUnavailableError as a handler failure", async () => {
    // Arrange
    const { options } = setup({ maxDeliveries: 1 });
    const { StoreUnavailableError } = await import('../../../src/index.js');
    const { delivery, actions } = fakeDelivery({ id: 'k1', body: 'a' });
    // Act
    await processDelivery(
      options,
      () => {
        throw new StoreUnavailableError('the handler’s own database');
      },
      delivery,
    );
    // Assert
    expect(actions).toMatchObject([{ op: 'dead_letter', letter: { reason: 'handler_error' } }]);
  });
});

describe('processDelivery: failures never lose or strand a delivery', () => {
  it('retries a handler error even when the engine stores errors (storeErrors: true)', async () => {
    // Arrange
    const idempotency = createIdempotency({
      store: memoryStore(),
      extendLease: false,
      storeErrors: true,
    });
    const options = resolveConsumerOptions<Message>(
      { idempotency, name: 'billing', maxDeliveries: 3, backoff: () => 300 },
      (message) => message.id,
    );
    let calls = 0;
    const flaky = () => {
      calls++;
      if (calls === 1) throw new Error('gateway timeout');
    };
    const first = fakeDelivery({ id: 'k1', body: 'a' }, 1);
    const second = fakeDelivery({ id: 'k1', body: 'a' }, 2);
    // Act
    await processDelivery(options, flaky, first.delivery);
    await processDelivery(options, flaky, second.delivery);
    // Assert
    expect(first.actions).toEqual([{ op: 'retry', delayMs: 300 }]);
    expect(second.actions).toEqual([{ op: 'ack' }]);
    expect(calls).toBe(2);
  });

  it('dead-letters a thrown value String() cannot convert, described by its content', async () => {
    // Arrange
    const { options } = setup({ maxDeliveries: 1 });
    const { delivery, actions } = fakeDelivery({ id: 'k1', body: 'a' });
    const thrown = Object.assign(Object.create(null), { code: 'E_DECLINED', message: 'declined' });
    // Act
    await processDelivery(
      options,
      () => {
        throw thrown;
      },
      delivery,
    );
    // Assert
    expect(actions).toMatchObject([
      {
        op: 'dead_letter',
        letter: {
          reason: 'handler_error',
          error: { message: '{"code":"E_DECLINED","message":"declined"}', code: 'E_DECLINED' },
        },
      },
    ]);
  });

  it('settles as a handler error, and reports, a delivery whose processing itself threw', async () => {
    // Arrange
    const reported: Array<{ operation: string; error: unknown }> = [];
    const { options } = setup({
      maxDeliveries: 1,
      isPermanentError: () => {
        throw new Error('policy bug');
      },
      hooks: { onBrokerError: (event) => void reported.push(event) },
    });
    const { delivery, actions } = fakeDelivery({ id: 'k1', body: 'a' });
    // Act
    const decision = await processDelivery(
      options,
      () => {
        throw new Error('boom');
      },
      delivery,
    );
    // Assert
    expect(decision).toMatchObject({ action: 'dead_letter', reason: 'handler_error' });
    expect(actions).toMatchObject([
      { op: 'dead_letter', letter: { error: { message: 'policy bug' } } },
    ]);
    expect(reported).toMatchObject([{ operation: 'process', error: { message: 'policy bug' } }]);
  });

  it('keeps the message when the dead letter cannot be written, carrying the letter on the redelivery', async () => {
    // Arrange
    const { options } = setup({ maxDeliveries: 1 });
    const retries: Array<{ delayMs: number; letter: DeadLetter | undefined }> = [];
    const delivery: Delivery<Message> = {
      message: { id: 'k1', body: 'a' },
      deliveryCount: 1,
      ack: () => {},
      retry: (delayMs, letter) => void retries.push({ delayMs, letter }),
      deadLetter: async () => {
        throw new Error('DLQ unreachable');
      },
    };
    // Act
    await processDelivery(
      options,
      () => {
        throw new Error('boom');
      },
      delivery,
    );
    // Assert
    expect(retries).toMatchObject([
      {
        delayMs: 30_000,
        letter: { key: 'k1', reason: 'handler_error', error: { message: 'boom' } },
      },
    ]);
  });

  it('writes a pending dead letter again without running the handler', async () => {
    // Arrange
    const { options } = setup();
    const letter: DeadLetter = {
      consumer: 'billing',
      key: 'k1',
      reason: 'handler_error',
      error: { name: 'Error', message: 'boom' },
      deliveryCount: 2,
      failedAt: '2026-01-01T00:00:00.000Z',
    };
    const { delivery, actions } = fakeDelivery({ id: 'k1', body: 'a' }, 3);
    delivery.pendingDeadLetter = letter;
    let calls = 0;
    // Act
    await processDelivery(options, () => void calls++, delivery);
    // Assert
    expect(calls).toBe(0);
    expect(actions).toEqual([{ op: 'dead_letter', letter }]);
  });
});

describe('consumer options', () => {
  it('refuses a consumer without a name or an engine', () => {
    // Arrange
    const store = memoryStore();
    // Act / Assert
    expect(() => resolveConsumerOptions({ idempotency: { store }, name: '' }, () => 'k')).toThrow(
      expect.objectContaining({ code: 'invalid_options' }),
    );
    let thrown: unknown;
    try {
      resolveConsumerOptions({ name: 'x' } as ConsumerOptions<unknown>, () => 'k');
    } catch (error) {
      thrown = error;
    }
    expect(isInvalidOptionsError(thrown)).toBe(true);
  });

  it('builds an engine from { store } options', () => {
    // Arrange / Act
    const options = resolveConsumerOptions(
      { idempotency: { store: memoryStore() }, name: 'x' },
      () => 'k',
    );
    // Assert
    expect(options.scope).toBe('consumer:x');
    expect(typeof options.engine.run).toBe('function');
  });
});

describe('InFlight', () => {
  it('drains once every running task settled, and bounds concurrency', async () => {
    // Arrange
    const inFlight = new InFlight(2);
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    await inFlight.acquire();
    inFlight.run(() => gate);
    await inFlight.acquire();
    inFlight.run(() => gate);
    // Act
    const third = inFlight.acquire();
    const before = inFlight.free;
    open();
    await third;
    inFlight.release();
    const drained = await inFlight.drain(1000);
    // Assert
    expect(before).toBe(0);
    expect(drained).toBe(true);
    expect(inFlight.size).toBe(0);
  });

  it('reports a drain that timed out', async () => {
    // Arrange
    const inFlight = new InFlight(1);
    inFlight.start(() => new Promise(() => {}));
    // Act
    const drained = await inFlight.drain(20);
    // Assert
    expect(drained).toBe(false);
  });
});
