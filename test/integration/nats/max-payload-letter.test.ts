/**
 * A JetStream message whose payload and headers nearly fill the server's `max_payload`. Its dead letter
 * adds headers of its own, and the NATS client refuses a publish past `max_payload` ("max_payload size
 * exceeded"): before, the letter was refused at every try, and the message, redelivered after each
 * `maxRetryDelay` to write it again, was never dead-lettered (or dropped unwritten by the server at a
 * finite `max_deliver`). Now the letter's headers are fitted to what the payload leaves: the values this
 * adapter adds are cut short, then the message's largest headers left out, named; the payload is whole.
 * A payload leaving too little for the fewest headers a letter carries is still kept, its letter tried
 * at each redelivery, now with an error that says why (`DeadLetterTooLargeError`).
 */
import { headers } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/nats/index.js';
import { type NatsFixture, natsFixture, until } from './setup.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('NATS consumer: a message near max_payload', () => {
  const fixtures: NatsFixture[] = [];
  afterAll(async () => {
    for (const f of fixtures) await f.destroy();
  });

  /** A failing consumer on a fixture of its own, with what it reported. */
  async function failing(label: string) {
    const f = await natsFixture(label);
    fixtures.push(f);
    const seen = { runs: 0, brokerErrors: [] as Error[], deadLetters: [] as string[] };
    const running = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      () => {
        seen.runs++;
        throw new Error('card declined');
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries: 1,
        minRetryDelay: '50ms',
        maxRetryDelay: '100ms',
        publisher: f.js,
        deadLetterSubject: f.dlq,
        hooks: {
          onBrokerError: (event) => seen.brokerErrors.push(event.error as Error),
          onDeadLetter: (event) => seen.deadLetters.push(event.reason),
        },
      },
    );
    return { f, seen, running };
  }

  it('is dead-lettered with its payload whole, its own large header left out and named', async () => {
    // Arrange
    const { f, seen, running } = await failing('max-payload');
    const maxPayload = f.nc.info?.max_payload as number;
    const sent = headers();
    sent.set('Nats-Msg-Id', 'pay-1');
    sent.set('trace', 't'.repeat(2000));
    const headerBytes = (sent as unknown as { encode(): Uint8Array }).encode().length;
    // 10 bytes short of max_payload: the original fits; its letter, with every header, does not.
    const payload = new Uint8Array(maxPayload - headerBytes - 10).fill(7);
    // Act
    await f.js.publish(f.subject, payload, { headers: sent });
    await until('the dead letter', () => seen.deadLetters.length + seen.brokerErrors.length > 0);
    // A redelivery (the letter's write failing) would come within maxRetryDelay.
    await sleep(500);
    // Assert
    expect(await running.close()).toBe(true);
    expect(seen.brokerErrors).toEqual([]);
    expect(seen.deadLetters).toEqual(['handler_error']);
    expect(seen.runs).toBe(1);
    const letters = await f.deadLetters();
    expect(letters).toHaveLength(1);
    expect(letters[0]?.data).toEqual(payload);
    expect(letters[0]?.header.get('x-idempotency-omitted-headers')).toBe('trace');
    expect(letters[0]?.header.get('x-idempotency-dead-letter-reason')).toBe('handler_error');
    expect(JSON.parse(letters[0]?.header.get('x-idempotency-error') ?? '')).toMatchObject({
      message: 'card declined',
    });
    const info = await f.jsm.consumers.info(f.stream, f.durable);
    expect(info.num_ack_pending + info.num_pending).toBe(0);
  });

  it('keeps a message whose payload leaves no room for a letter, saying why, without running it again', async () => {
    // Arrange
    const { f, seen, running } = await failing('max-payload-full');
    const maxPayload = f.nc.info?.max_payload as number;
    const sent = headers();
    sent.set('Nats-Msg-Id', 'pay-2');
    // Act: 100 bytes short of max_payload, no header but the id.
    await f.js.publish(f.subject, new Uint8Array(maxPayload - 100), { headers: sent });
    await until('two tries of the letter', () => seen.brokerErrors.length >= 2);
    // Assert
    await running.close();
    expect(seen.runs).toBe(1);
    expect(seen.deadLetters).toEqual([]);
    expect(seen.brokerErrors[0]?.name).toBe('DeadLetterTooLargeError');
    expect(seen.brokerErrors[0]?.message).toContain(`max_payload (${maxPayload} bytes)`);
    expect(await f.deadLetters()).toHaveLength(0);
    // Neither acked nor terminated: the consumer's ack floor is still below it (the stream's first).
    const info = await f.jsm.consumers.info(f.stream, f.durable);
    expect(info.ack_floor.stream_seq).toBe(0);
  });
});
