/**
 * `close()` resolving is the end of every hook call, against a fake channel: a handler still running when
 * `close()` gives up on the drain and resolves `false` fails afterwards, on the last allowed delivery, and
 * its message is dead-lettered (the copy published, the original acked: the work goes on). Before,
 * `onDeadLetter` then fired behind the `close()` that had resolved, to an application that had closed the
 * consumer.
 */
import { describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../../../src/amqp/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { heldFailingHandler, recordingHooks } from '../../helpers/close-hooks.js';
import { waitUntil } from '../../helpers/wait-until.js';
import { fakeChannel, message } from './fake-channel.js';

describe('amqp consumer: close() and the hooks of work still running', () => {
  it('calls no hook after close() resolved false, though the message is dead-lettered afterwards', async () => {
    // Arrange: a channel that records the copies it is sent, each confirmed at once.
    const { channel, control, acked } = fakeChannel();
    const copies: string[] = [];
    type Confirmed = (error: unknown, ok: unknown) => void;
    Object.assign(channel, {
      sendToQueue: (queue: string, _content: Buffer, _options: object, confirmed: Confirmed) => {
        copies.push(queue);
        setImmediate(() => confirmed(null, {}));
        return true;
      },
    });
    const held = heldFailingHandler();
    const hooks: string[] = [];
    const consumer = await idempotentConsumer(channel, held.handler, {
      queue: 'q',
      name: 'c',
      idempotency: createIdempotency({ store: memoryStore() }),
      maxDeliveries: 1,
      drainTimeout: '50ms',
      hooks: recordingHooks(hooks),
    });
    control.deliver(message(1));
    await waitUntil('the handler to start', held.started, 2000);

    // Act: close() gives up on the running handler; then the handler fails.
    const closing = consumer.close();
    control.answerCancel();
    const closed = await closing;
    hooks.push('closed');
    held.release();
    await waitUntil('the original to be acked', () => acked.length === 1, 2000);
    await new Promise((resolve) => setTimeout(resolve, 50));

    // Assert: the letter was published and its original acked, and no hook was called for it.
    expect(closed).toBe(false);
    expect(copies).toEqual(['q.dlq']);
    expect(acked).toEqual([1]);
    expect(hooks).toEqual(['closed']);
  });
});
