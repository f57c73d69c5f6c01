import { randomBytes } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { natsPublisher, type OutboxMessage } from '../../../src/outbox/index.js';
import { natsConnectionForFile } from '../../helpers/nats-connection.js';
import { outboxMessage } from '../../helpers/outbox-message.js';

const run = randomBytes(4).toString('hex');

function message(payload: Uint8Array): OutboxMessage {
  return outboxMessage(`msg-${run}`, { topic: 'too.large', payload });
}

describe('natsPublisher: a message over the server’s max_payload', () => {
  const connection = natsConnectionForFile();

  it('fails naming its size, headers included, and the limit the server announced', async () => {
    // Arrange: the client refuses it before sending anything, and said only "'payload' max_payload size
    // exceeded": no size, no limit, on every retry of the row. The limit counts the headers too, so a
    // payload of exactly max_payload bytes is refused as well.
    const nc = connection();
    const limit = nc.info?.max_payload ?? 0;
    expect(limit).toBeGreaterThan(0);
    const publisher = natsPublisher({ js: jetstream(nc), headers, subject: () => `outbox.${run}` });

    // Act
    const over = await publisher.publish(message(new Uint8Array(limit + 1))).catch((e: Error) => e);
    const at = await publisher.publish(message(new Uint8Array(limit))).catch((e: Error) => e);

    // Assert
    for (const [error, size] of [
      [over, limit + 1],
      [at, limit],
    ] as const) {
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toMatch(
        new RegExp(
          `^NATS refused message msg-${run}-\\w+: ${size} bytes of payload and \\d+ bytes of headers, over the server's max_payload of ${limit} bytes`,
        ),
      );
      expect(((error as Error).cause as Error).message).toBe("'payload' max_payload size exceeded");
    }
  });
});
