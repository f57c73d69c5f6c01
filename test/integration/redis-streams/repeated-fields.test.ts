/**
 * Entries with a field name more than once, against a real Redis (`XADD s * item a item b` is kept as is).
 * `entry.fields` and `entry.buffers` hold each name's last value; before, that was all there was: the
 * dead letter lost the earlier values (a replay from it was another message), and an entry whose
 * `x-idempotency-key` came twice with different values ran keyed by the last one, as a duplicate of that
 * key if it had run. Now the handler also gets every field in order (`entry.pairs`), the dead letter
 * copies them all, and the default key refuses two different keys (dead-lettered, `invalid_key`).
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer, type StreamEntry } from '../../../src/redis-streams/index.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer: repeated field names', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups } = fixture;

  /** The fields of the dead letters of `stream`, as Redis holds them (pairs flattened). */
  const letters = async (stream: string) =>
    (
      (await fixture.admin.sendCommand(['XRANGE', `${stream}:dlq`, '-', '+'])) as Array<
        [string, string[]]
      >
    ).map(([, fields]) => fields);

  /** A consumer of a new stream whose handler fails, dead-lettering on the first delivery. */
  async function failingConsumer(test: string, seen: StreamEntry[], reasons: string[]) {
    const stream = `ik-test:streams-repeated-fields:${test}:${run}`;
    streams.push(stream, `${stream}:dlq`);
    const consumer = await idempotentConsumer(
      fixture.admin,
      (entry) => {
        seen.push(entry);
        throw new Error('refused');
      },
      {
        stream,
        group: 'workers',
        name: `repeated-fields-${test}-${run}`,
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries: 1,
        pollInterval: '10ms',
        hooks: { onDeadLetter: (event) => void reasons.push(event.reason) },
      },
    );
    cleanups.push(() => consumer.close());
    return stream;
  }

  it('gives the handler every field and copies every one into the dead letter, in order', async () => {
    // Arrange
    const seen: StreamEntry[] = [];
    const reasons: string[] = [];
    const stream = await failingConsumer('letter', seen, reasons);
    // Act
    await fixture.admin.sendCommand([
      'XADD',
      stream,
      '*',
      'x-idempotency-key',
      'order-1',
      'item',
      'sku-1',
      'item',
      'sku-2',
    ]);
    await waitUntil('the dead letter', () => reasons.length === 1);
    // Assert
    expect(seen[0]?.fields.item).toBe('sku-2');
    expect(seen[0]?.pairs?.map(([name, value]) => [name, value.toString()])).toEqual([
      ['x-idempotency-key', 'order-1'],
      ['item', 'sku-1'],
      ['item', 'sku-2'],
    ]);
    const [letter] = await letters(stream);
    expect(letter?.slice(0, 6)).toEqual([
      'x-idempotency-key',
      'order-1',
      'item',
      'sku-1',
      'item',
      'sku-2',
    ]);
  });

  it('dead-letters, never runs, an entry whose x-idempotency-key comes twice with different values', async () => {
    // Arrange
    const seen: StreamEntry[] = [];
    const reasons: string[] = [];
    const stream = await failingConsumer('key', seen, reasons);
    // Act
    await fixture.admin.sendCommand([
      'XADD',
      stream,
      '*',
      'x-idempotency-key',
      'pay-a',
      'x-idempotency-key',
      'pay-b',
    ]);
    await waitUntil('the dead letter', () => reasons.length === 1);
    // Assert
    expect(reasons).toEqual(['invalid_key']);
    expect(seen).toEqual([]);
    const [letter] = await letters(stream);
    expect(letter?.slice(0, 4)).toEqual([
      'x-idempotency-key',
      'pay-a',
      'x-idempotency-key',
      'pay-b',
    ]);
  });
});
