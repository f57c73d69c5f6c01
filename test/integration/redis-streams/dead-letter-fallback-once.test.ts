/**
 * A dead letter written once where the dead-letter script cannot run, against a real Redis: a user whose
 * ACL denies `EVAL` (`NOPERM`), so the consumer writes the letter and acks the entry in two commands,
 * `XADD` then `XACK`. The case that wrote two letters: the `XADD` lands and the `XACK` fails (here the
 * same user's ACL denies `XACK` for that moment; a dropped connection or a timeout does the same), so the
 * entry stays pending, is reclaimed, finds its letter recorded and wrote it again. Now that redelivery
 * finds the letter in the dead-letter stream (its entry id, consumer and `failedAt`) and only acks.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer, type RedisStreamsClient } from '../../../src/redis-streams/index.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer: dead letters written once without the script', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups, add } = fixture;

  const letters = async (stream: string) =>
    (
      (await fixture.admin.sendCommand(['XRANGE', `${stream}:dlq`, '-', '+'])) as Array<
        [string, string[]]
      >
    ).map(([, fields]) => fields[fields.indexOf('x-idempotency-entry-id') + 1]);

  const pending = async (stream: string) =>
    Number(((await fixture.admin.sendCommand(['XPENDING', stream, 'workers'])) as [number])[0]);

  /**
   * A consumer of `stream` through `client` whose handler always fails, one delivery allowed: each entry
   * is dead-lettered at once. Records the handler's keys, the letters and duplicates reported, and the
   * broker errors apart.
   */
  async function failingConsumer(client: RedisStreamsClient, stream: string, name: string) {
    const calls: string[] = [];
    const events: string[] = [];
    const brokerErrors: string[] = [];
    const consumer = await idempotentConsumer(
      client,
      (_entry, context) => {
        calls.push(context.key);
        throw new Error('boom');
      },
      {
        stream,
        group: 'workers',
        name,
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries: 1,
        maxRetryDelay: '100ms',
        minIdle: '200ms',
        claimInterval: '50ms',
        pollInterval: '20ms',
        hooks: {
          onDeadLetter: (event) => void events.push(`dead-letter:${event.deliveryCount}`),
          onDuplicate: (event) => void events.push(`duplicate:${event.deliveryCount}`),
          onBrokerError: (event) =>
            void brokerErrors.push(`${event.operation}:${event.deliveryCount}`),
        },
      },
    );
    cleanups.push(() => consumer.close());
    return { consumer, calls, events, brokerErrors };
  }

  it.each([[0], [250]])(
    'writes no second letter when the XACK after its XADD failed (%i letters added after it)',
    async (others) => {
      // Arrange: a user without scripting; its XACK denied until the letter is in the DLQ.
      const user = `ik-test-noeval-${run}-${others}`;
      const stream = `ik-test:streams-dead-letter-fallback:${run}:${others}`;
      streams.push(stream, `${stream}:dlq`);
      const real = await fixture.userWithoutScripts(user);
      await fixture.admin.sendCommand(['ACL', 'SETUSER', user, '-xack']);
      // No claim round after the XACK failed runs (XAUTOCLAIM: no script) until the letters after it
      // are added and XACK is allowed again: the redelivery comes then, once. Without the gate, adding
      // the letters one by one (300-400 ms on a loaded machine) outlasted the 100 ms retry delay: each
      // redelivery meanwhile found its letter, had its XACK denied and was retried, so the letter was
      // reported by the third delivery or a later one ('dead-letter:3'), not by the second.
      let ackFailed = false;
      let allowClaims = () => {};
      const claimsAllowed = new Promise<void>((resolve) => {
        allowClaims = resolve;
      });
      const client: RedisStreamsClient = {
        sendCommand: async (args: Array<string | Buffer>, options?: object) => {
          if (String(args[0]) === 'XAUTOCLAIM' && ackFailed) await claimsAllowed;
          try {
            return await real.sendCommand(args, options);
          } catch (error) {
            if (String(args[0]) === 'XACK') ackFailed = true;
            throw error;
          }
        },
      };
      const { consumer, calls, events, brokerErrors } = await failingConsumer(
        client,
        stream,
        `dead-letter-fallback-${run}`,
      );
      const id = (await add(stream, 'dead-fallback')) as string;

      // Act: the XADD lands, the XACK fails (NOPERM); then XACK is allowed again and the entry reclaimed.
      await waitUntil('the letter', async () => (await letters(stream)).length > 0, 10_000);
      await waitUntil('the failed XACK', () => brokerErrors.includes('dead_letter:1'));
      // Letters of other entries after it: the look pages back through them (100 a page) to find it.
      const added = Array.from({ length: others }, (_, index) => `other-${index}`);
      for (const other of added) {
        await fixture.admin.sendCommand([
          'XADD',
          `${stream}:dlq`,
          '*',
          'x-idempotency-entry-id',
          other,
        ]);
      }
      await fixture.admin.sendCommand(['ACL', 'SETUSER', user, '+xack']);
      allowClaims();
      await waitUntil('the entry acked', async () => (await pending(stream)) === 0, 10_000);
      await new Promise((resolve) => setTimeout(resolve, 300));

      // Assert: one letter (before: two), the handler run once, the letter reported once.
      expect(await consumer.close()).toBe(true);
      expect(await letters(stream)).toEqual([id, ...added]);
      expect(calls).toEqual(['dead-fallback']);
      expect(events).toEqual(['dead-letter:2']);
    },
  );

  it('writes no second letter when the XADD landed and its reply was lost', async () => {
    // Arrange: a user without scripting, through a client whose first XADD lands but answers with an
    // error (a connection dropped after the command was written: the reply never comes).
    const stream = `ik-test:streams-dead-letter-fallback:${run}:lost-reply`;
    streams.push(stream, `${stream}:dlq`);
    const real = await fixture.userWithoutScripts(`ik-test-noeval-${run}-lost`);
    let lost = 0;
    const client: RedisStreamsClient = {
      sendCommand: async (args: Array<string | Buffer>, options?: object) => {
        const reply = await real.sendCommand(args, options);
        if (String(args[0]) === 'XADD' && lost++ === 0)
          throw new Error('Socket closed unexpectedly');
        return reply;
      },
    };
    const { consumer, calls, events } = await failingConsumer(
      client,
      stream,
      `dead-letter-fallback-${run}-lost`,
    );

    // Act
    const id = (await add(stream, 'dead-lost-reply')) as string;
    await waitUntil('the letter reported', () => events.length > 0, 10_000);
    await new Promise((resolve) => setTimeout(resolve, 300));

    // Assert: one letter (before: two), the entry acked by the redelivery that found it.
    expect(await consumer.close()).toBe(true);
    expect(await letters(stream)).toEqual([id]);
    expect(await pending(stream)).toBe(0);
    expect(calls).toEqual(['dead-lost-reply']);
    expect(events).toEqual(['dead-letter:2']);
  });
});
