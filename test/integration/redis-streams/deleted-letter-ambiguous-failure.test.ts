/**
 * The dead letter of an entry deleted while its handler ran, where the scripts cannot run (an ACL denying
 * `EVAL`: Redis 7's `XCLAIM`, resetting the handler's idle time, has dropped the id, so no redelivery can
 * come), whose `XADD` lands but answers with an error, against a real Redis 7. An error is not a refusal:
 * a connection reset after Redis ran the command, or the client's own command timeout (ioredis
 * `commandTimeout`) rejecting while Redis still runs it. Before, the failure was taken for "not written"
 * and the entry recorded again as deleted (in time: by the settle's retry; after `brokerTimeout`: at once),
 * so the dead-letter stream held two letters for one entry. Now the letter is looked for first
 * (letter-written.ts), and one found counts as written.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type RedisStreamsClient,
  type RedisStreamsConsumerErrorEvent,
} from '../../../src/redis-streams/index.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer: a deleted entry’s letter that landed but answered with an error', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups } = fixture;

  /** The entry id and reason of each letter of `stream`. */
  const letters = async (stream: string) =>
    (
      (await fixture.admin.sendCommand(['XRANGE', `${stream}:dlq`, '-', '+'])) as Array<
        [string, string[]]
      >
    ).map(([, fields]) => [
      fields[fields.indexOf('x-idempotency-entry-id') + 1],
      fields[fields.indexOf('x-idempotency-dead-letter-reason') + 1],
    ]);

  it.each([
    ['in time', 0, 'Socket closed unexpectedly'],
    ['after brokerTimeout', 500, 'Command timed out'],
  ])(
    'writes one letter when its XADD landed and then failed %s',
    async (when, delayMs, message) => {
      // Arrange: a user without scripting, through a client whose first dead-letter XADD runs in Redis
      // and then rejects (after `delayMs`: past a brokerTimeout of 200 ms for the late case).
      const name = when.replaceAll(' ', '-');
      const stream = `ik-test:streams-deleted-ambiguous:${name}:${run}:${process.pid}`;
      streams.push(stream, `${stream}:dlq`);
      const real = await fixture.userWithoutScripts(`ik-test-noeval-ambiguous-${name}-${run}`);
      let xadds = 0;
      // Set once the consumer can know the entry gone: an idle reset's XRANGE found no entry (after its
      // XCLAIM dropped the id), or a claim round's XAUTOCLAIM listed the id as deleted (Redis 7's drops it
      // whatever its idle time; the round tells the holder).
      let foundDeleted = false;
      const client: RedisStreamsClient = {
        sendCommand: async (args: Array<string | Buffer>, options?: object) => {
          const reply = await real.sendCommand(args, options);
          if (String(args[0]) === 'XRANGE' && Array.isArray(reply) && reply.length === 0) {
            foundDeleted = true;
          }
          if (
            String(args[0]) === 'XAUTOCLAIM' &&
            Array.isArray(reply) &&
            Array.isArray(reply[2]) &&
            reply[2].map(String).includes(id)
          ) {
            foundDeleted = true;
          }
          if (String(args[0]) === 'XADD' && String(args[1]) === `${stream}:dlq` && xadds++ === 0) {
            await new Promise((resolve) => setTimeout(resolve, delayMs));
            throw new Error(message);
          }
          return reply;
        },
      };
      const id = String(await fixture.add(stream, `pay-ambiguous-${name}`));
      const errors: RedisStreamsConsumerErrorEvent[] = [];
      const deadLetters: number[] = [];
      let handled = 0;
      const consumer = await idempotentConsumer(
        client,
        async () => {
          handled++;
          // Deleted while held; failing once the consumer could know it (see `foundDeleted`).
          await fixture.admin.sendCommand(['XDEL', stream, id]);
          await waitUntil('the deletion found', () => foundDeleted, 5_000);
          throw new Error('card declined');
        },
        {
          stream,
          group: 'workers',
          name: `deleted-ambiguous-${name}-${run}`,
          idempotency: createIdempotency({ store: memoryStore() }),
          maxDeliveries: 1,
          minIdle: '300ms',
          brokerTimeout: '200ms',
          claimInterval: '50ms',
          pollInterval: '10ms',
          hooks: {
            onConsumerError: (event) => void errors.push(event),
            onDeadLetter: (event) => void deadLetters.push(event.deliveryCount),
          },
        },
      );
      cleanups.push(() => consumer.close());

      // Act: the letter lands; its XADD's error comes (late or not); anything it sets off has time to run.
      await waitUntil('the letter', async () => (await letters(stream)).length > 0, 5_000);
      await waitUntil('the XADD’s error', () => xadds > 0);
      await new Promise((resolve) => setTimeout(resolve, delayMs + 500));

      // Assert: one letter, the handler's (before: a second one, of reason `deleted`), reported once.
      expect(await consumer.close()).toBe(true);
      expect(await letters(stream)).toEqual([[id, 'handler_error']]);
      expect(handled).toBe(1);
      expect(deadLetters).toEqual([1]);
      expect(errors.filter((event) => event.operation === 'deleted')).toEqual([]);
    },
  );
});
