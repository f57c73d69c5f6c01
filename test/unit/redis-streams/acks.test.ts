import { describe, expect, it } from 'vitest';
import { AckBatcher } from '../../../src/redis-streams/acks.js';

/** One XACK the test answers (or fails) when it chooses. */
interface SentAck {
  ids: string[];
  resolve(reply: unknown): void;
  reject(error: unknown): void;
}

/** A sender recording each XACK; the test settles their replies. */
function fakeSender() {
  const sent: SentAck[] = [];
  const send = (ids: string[]) =>
    new Promise<unknown>((resolve, reject) => void sent.push({ ids, resolve, reject }));
  return { send, sent };
}

/** Resolves after every callback queued so far, the batcher's `process.nextTick` flush included. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The state of `promise` right now: 'pending', 'resolved' or 'rejected'. */
async function state(promise: Promise<unknown>): Promise<string> {
  let settled = 'pending';
  promise.then(
    () => (settled = 'resolved'),
    () => (settled = 'rejected'),
  );
  await nextTurn();
  return settled;
}

describe('AckBatcher (Redis Streams)', () => {
  it('sends the acks of one burst as one XACK and resolves each caller only once its reply is back', async () => {
    // Arrange
    const { send, sent } = fakeSender();
    const batcher = new AckBatcher(send, 60_000);
    // Act: acks decided in one burst of microtasks, as a store batch settles its messages.
    const acks = await Promise.resolve().then(() =>
      ['1-0', '2-0', '3-0'].map((id) => batcher.ack(id)),
    );
    // A later microtask of the same burst (in an array: awaiting the ack itself would wait for its reply).
    const [more] = await Promise.resolve().then(() => [batcher.ack('4-0')]);
    await nextTurn();
    // Assert
    expect(sent.map((s) => s.ids)).toEqual([['1-0', '2-0', '3-0', '4-0']]);
    for (const ack of [...acks, more!]) expect(await state(ack)).toBe('pending');
    sent[0]!.resolve(4);
    await Promise.all([...acks, more]);
  });

  it('sends acks of later turns in their own XACK', async () => {
    // Arrange
    const { send, sent } = fakeSender();
    const batcher = new AckBatcher(send, 60_000);
    // Act
    const first = batcher.ack('1-0');
    await nextTurn();
    const second = batcher.ack('2-0');
    await nextTurn();
    // Assert
    expect(sent.map((s) => s.ids)).toEqual([['1-0'], ['2-0']]);
    sent[1]!.resolve(1);
    expect(await state(second)).toBe('resolved');
    expect(await state(first)).toBe('pending');
    sent[0]!.resolve(1);
    await first;
  });

  it('rejects every caller of a failed XACK, and sends the next burst as usual', async () => {
    // Arrange
    const { send, sent } = fakeSender();
    const batcher = new AckBatcher(send, 60_000);
    // Each caller awaits its ack at once, as processDelivery does.
    const failed = [batcher.ack('1-0'), batcher.ack('2-0')].map((ack) =>
      ack.then(
        () => 'resolved',
        (error: Error) => error.message,
      ),
    );
    await nextTurn();
    // Act
    sent[0]!.reject(new Error('connection lost'));
    const later = batcher.ack('3-0');
    await nextTurn();
    sent[1]!.resolve(1);
    // Assert
    expect(await Promise.all(failed)).toEqual(['connection lost', 'connection lost']);
    expect(sent.map((s) => s.ids)).toEqual([['1-0', '2-0'], ['3-0']]);
    await expect(later).resolves.toBeUndefined();
  });

  it('rejects every caller when the send itself throws', async () => {
    // Arrange
    const batcher = new AckBatcher(() => {
      throw new TypeError('client: neither node-redis sendCommand nor ioredis call found');
    }, 60_000);
    // Act
    const acks = [batcher.ack('1-0'), batcher.ack('2-0')];
    // Assert
    for (const ack of acks) await expect(ack).rejects.toThrow(TypeError);
  });

  it('rejects every caller of an XACK not answered within its timeout, and only then', async () => {
    // Arrange: a reply that never comes (a connection hung without a command timeout).
    const { send, sent } = fakeSender();
    const batcher = new AckBatcher(send, 30);
    // Act
    const acks = [batcher.ack('1-0'), batcher.ack('2-0')];
    await nextTurn();
    // Assert
    expect(sent.map((s) => s.ids)).toEqual([['1-0', '2-0']]);
    expect(await state(acks[0]!)).toBe('pending');
    for (const ack of acks) {
      await expect(ack).rejects.toMatchObject({
        name: 'BrokerTimeoutError',
        message: expect.stringContaining('the XACK of 2 entries'),
      });
    }
  });
});
