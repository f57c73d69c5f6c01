/**
 * The NATS connection of a running idempotent consumer closed under it (the application's `nc.close()`, or
 * the client giving up reconnecting during an outage): the message loop ends, and that must be reported,
 * not only resolve `done`; a service alerting on `onConsumerError` would otherwise run on, receiving
 * nothing, with nothing said.
 */
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer, type NatsConsumer } from '../../../src/nats/index.js';
import { env } from '../../helpers/env.js';
import { type NatsFixture, natsFixture, until } from './setup.js';

describe('NATS consumer: its connection closed', () => {
  let f: NatsFixture | undefined;
  let nc: NatsConnection | undefined;
  let running: NatsConsumer | undefined;

  afterEach(async () => {
    await running?.close();
    if (nc !== undefined && !nc.isClosed()) await nc.close();
    await f?.destroy();
  });

  it('resolves done and reports `consume` when the connection closes without close()', async () => {
    // Arrange
    f = await natsFixture('conn-closed');
    nc = await connect({ servers: env.natsUrl });
    const handled: string[] = [];
    const errors: Array<{ operation: string; error: unknown }> = [];
    running = await idempotentConsumer(
      await jetstream(nc).consumers.get(f.stream, f.durable),
      (message) => void handled.push(message.headers?.get('Nats-Msg-Id') ?? ''),
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        hooks: { onConsumerError: (event) => void errors.push(event) },
      },
    );
    let ended = false;
    void running.done.then(() => {
      ended = true;
    });
    await f.publish('a');
    await until('the first message', () => handled.length === 1);
    // Act
    await nc.close();
    await until('done', () => ended);
    // Assert
    expect(errors).toHaveLength(1);
    expect(errors[0]?.operation).toBe('consume');
    expect(String((errors[0]?.error as Error | undefined)?.message)).toContain('connection closed');
  });

  it('reports nothing when close() ends the loop', async () => {
    // Arrange
    f = await natsFixture('conn-close-call');
    nc = await connect({ servers: env.natsUrl });
    const errors: unknown[] = [];
    running = await idempotentConsumer(
      await jetstream(nc).consumers.get(f.stream, f.durable),
      () => {},
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        hooks: { onConsumerError: (event) => void errors.push(event) },
      },
    );
    // Act
    expect(await running.close()).toBe(true);
    await running.done;
    await nc.close();
    // Assert
    expect(errors).toEqual([]);
  });
});
