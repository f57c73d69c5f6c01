/**
 * `close()` resolving is the end of every hook call, against a fake pull consumer: a handler still running
 * when `close()` gives up on the drain and resolves `false` fails afterwards, on the last allowed delivery,
 * and its message is dead-lettered (`term()`: the work goes on). Before, `onDeadLetter` then fired behind
 * the `close()` that had resolved, to an application that had closed the consumer.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type NatsJsMsg,
  type NatsPullConsumer,
} from '../../../src/nats/index.js';
import { heldFailingHandler, recordingHooks } from '../../helpers/close-hooks.js';
import { waitUntil } from '../../helpers/wait-until.js';

/** A pull consumer that brings one message (`pay-1`), then pulls that wait until closed. */
function oneMessageConsumer() {
  const settled: string[] = [];
  const first: NatsJsMsg = {
    subject: 'orders',
    data: new Uint8Array(0),
    headers: { has: (name: string) => name === 'Nats-Msg-Id', get: () => 'pay-1' },
    seq: 1,
    info: { deliveryCount: 1, stream: 'ORDERS', streamSequence: 1 },
    ack: () => void settled.push('ack'),
    nak: () => void settled.push('nak'),
    working: () => {},
    term: () => void settled.push('term'),
  } as unknown as NatsJsMsg;
  let given = false;
  const fetch = async () => {
    let wake: (() => void) | undefined;
    let closed = false;
    return {
      async *[Symbol.asyncIterator]() {
        if (!given) {
          given = true;
          yield first;
          return;
        }
        while (!closed) await new Promise<void>((resolve) => (wake = resolve));
      },
      close: async () => {
        closed = true;
        wake?.();
      },
    };
  };
  const consumer = { fetch, info: async () => ({ config: { ack_wait: 30e9 } }) };
  return { consumer: consumer as unknown as NatsPullConsumer, settled };
}

describe('NATS consumer: close() and the hooks of work still running', () => {
  it('calls no hook after close() resolved false, though the message is dead-lettered afterwards', async () => {
    // Arrange
    const { consumer, settled } = oneMessageConsumer();
    const held = heldFailingHandler();
    const hooks: string[] = [];
    const running = await idempotentConsumer(consumer, held.handler, {
      name: 'c',
      idempotency: createIdempotency({ store: memoryStore() }),
      maxDeliveries: 1,
      drainTimeout: '50ms',
      hooks: recordingHooks(hooks),
    });
    await waitUntil('the handler to start', held.started, 2000);

    // Act: close() gives up on the running handler; then the handler fails.
    const closed = await running.close();
    hooks.push('closed');
    held.release();
    await waitUntil('the message to be terminated', () => settled.length === 1, 2000);
    await new Promise((resolve) => setTimeout(resolve, 50));

    // Assert: the message was terminated (its dead letter), and no hook was called for it.
    expect(closed).toBe(false);
    expect(settled).toEqual(['term']);
    expect(hooks).toEqual(['closed']);
  });
});
