import { randomBytes } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { natsPublisher } from '../../../src/outbox/index.js';
import { natsConnectionForFile } from '../../helpers/nats-connection.js';
import { outboxMessage } from '../../helpers/outbox-message.js';

const run = randomBytes(4).toString('hex');

describe('natsPublisher: a subject that no JetStream stream captures', () => {
  const nc = natsConnectionForFile();

  it('fails naming the subject and the missing stream, not "jetstream is not enabled"', async () => {
    // Arrange: nobody answers the publish (503 no responders), which the client reported as
    // "JetStreamNotEnabled: jetstream is not enabled", in last_error on every retry of the row, although
    // this server runs JetStream: only the subject is captured by no stream.
    const subject = `outbox-no-stream.${run}.orders`;
    const publisher = natsPublisher({ js: jetstream(nc()), headers, subject: () => subject });
    const sent = outboxMessage(`msg-${run}`);

    // Act
    const error = await publisher.publish(sent).catch((e: unknown) => e);

    // Assert
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toBe(
      `NATS JetStream did not store message ${sent.id}: nobody answered the publish to subject ` +
        `"${subject}", most often because no stream captures it. Add the subject to a stream's subjects, ` +
        'or change the publisher’s `subject`; if no stream answers any subject, JetStream is not enabled ' +
        'on the server or account, or is unavailable (no leader)',
    );
    const cause = (error as Error).cause as Error;
    expect(cause.name).toBe('JetStreamNotEnabled');
    expect(cause.message).toBe('jetstream is not enabled');
  });

  it('leaves a JetStreamNotEnabled that is not a publish nobody answered as it is', async () => {
    // The JetStream API throws the same class, with an API error as the cause, for an account without
    // JetStream: that one is what it says.
    const apiError = Object.assign(new Error('jetstream not enabled for account'), {
      name: 'JetStreamApiError',
      code: 10039,
    });
    const notEnabled = Object.assign(new Error('jetstream is not enabled', { cause: apiError }), {
      name: 'JetStreamNotEnabled',
    });
    const publisher = natsPublisher({
      js: {
        publish: async () => {
          throw notEnabled;
        },
      },
      headers,
    });

    await expect(publisher.publish(outboxMessage(`msg-${run}`))).rejects.toBe(notEnabled);
  });
});
