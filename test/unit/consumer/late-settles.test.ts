/**
 * Settle calls given up on after `brokerTimeout`, tracked for `close()` whatever the broker: a dead letter
 * or a retry that goes on once its delivery settled is waited for, and a late letter's `onDeadLetter` is
 * made before that wait ends; one that does not settle by the deadline makes the wait say so.
 */
import { describe, expect, it } from 'vitest';
import {
  type Delivery,
  processDelivery,
  resolveConsumerOptions,
} from '../../../src/consumer/index.js';
import { LateSettles } from '../../../src/consumer/late-settles.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';

interface Message {
  id?: string;
}

/** A call that answers when the test says. */
function heldCall() {
  let resolve!: () => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A consumer's resolved options whose hooks record into `hooks`, and a delivery settling through `call`. */
function givenUp(call: Promise<void>, maxDeliveries: number) {
  const hooks: string[] = [];
  const options = resolveConsumerOptions<Message>(
    {
      idempotency: createIdempotency({ store: memoryStore() }),
      name: 'billing',
      brokerTimeout: '20ms',
      maxDeliveries,
      hooks: {
        onDeadLetter: () => void hooks.push('dead_letter'),
        onBrokerError: (event) => void hooks.push(`broker_error:${event.operation}`),
      },
    },
    (message) => message.id,
  );
  const delivery: Delivery<Message> = {
    message: { id: 'pay-1' },
    deliveryCount: 1,
    ack: () => {},
    retry: () => call,
    deadLetter: () => call,
  };
  const failing = () => {
    throw new Error('card declined');
  };
  return { options, hooks, settled: processDelivery(options, failing, delivery) };
}

const soon = (ms: number) => performance.now() + ms;

describe('late settles', () => {
  it('waits for a dead letter given up on, and ends after its late report', async () => {
    // Arrange
    const write = heldCall();
    const run = givenUp(write.promise, 1);
    await run.settled;
    expect(run.hooks).toEqual(['broker_error:dead_letter']);

    // Act
    const waiting = run.options.lateSettles.settledBy(soon(1000)).then((settled) => {
      run.hooks.push('settled');
      return settled;
    });
    setTimeout(() => write.resolve(), 30);

    // Assert
    expect(await waiting).toBe(true);
    expect(run.hooks).toEqual(['broker_error:dead_letter', 'dead_letter', 'settled']);
    expect(run.options.lateSettles.size).toBe(0);
  });

  it('waits for a retry given up on, a late failure included', async () => {
    // Arrange
    const retry = heldCall();
    const run = givenUp(retry.promise, 5);
    await run.settled;
    expect(run.hooks).toEqual(['broker_error:retry']);
    expect(run.options.lateSettles.size).toBe(1);

    // Act
    setTimeout(() => retry.reject(new Error('channel closed')), 30);

    // Assert
    expect(await run.options.lateSettles.settledBy(soon(1000))).toBe(true);
    expect(run.options.lateSettles.size).toBe(0);
  });

  it('says false when a call has not settled by the deadline', async () => {
    // Arrange
    const run = givenUp(heldCall().promise, 1);
    await run.settled;

    // Act
    const started = performance.now();
    const settled = await run.options.lateSettles.settledBy(soon(50));

    // Assert
    expect(settled).toBe(false);
    expect(performance.now() - started).toBeLessThan(1000);
    expect(run.hooks).toEqual(['broker_error:dead_letter']);
  });

  it('waits for a call added while it waits, and for nothing when none is going', async () => {
    // Arrange
    const late = new LateSettles();
    expect(await late.settledBy(soon(0))).toBe(true);
    const first = heldCall();
    const second = heldCall();
    late.add(first.promise);

    // Act
    const waiting = late.settledBy(soon(1000));
    late.add(second.promise);
    first.resolve();
    let done = false;
    void waiting.then(() => {
      done = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const beforeSecond = done;
    second.resolve();

    // Assert
    expect(beforeSecond).toBe(false);
    expect(await waiting).toBe(true);
  });
});
