import { describe, expect, it } from 'vitest';
import type { OutboxMessage } from '../../../src/outbox/index.js';
import {
  amqpPublisher,
  natsPublisher,
  type RedisStreamsPublisherOptions,
  redisStreamsPublisher,
} from '../../../src/outbox/index.js';

// Stand-ins with the methods the factories look for; nothing is published in these tests.
const js = { publish: async () => ({ duplicate: false, seq: 1, stream: 's' }) } as never;
const channel = {
  publish: () => true,
  on: () => undefined,
  waitForConfirms: async () => {},
} as never;

describe('publisher options are checked, not coerced', () => {
  it.each([
    [{ timeoutMs: Number.NaN }, /timeoutMs must be a positive number of ms, got NaN/],
    [{ timeoutMs: -1 }, /timeoutMs must be a positive number of ms, got -1/],
    [{ timeoutMs: '5s' }, /timeoutMs must be a positive number of ms, got "5s"/],
    [{ subject: 'orders' }, /`subject` must be a function of the message/],
  ])('natsPublisher refuses %o', (bad, message) => {
    expect(() => natsPublisher({ js, ...(bad as object) })).toThrow(
      expect.objectContaining({ code: 'invalid_options', message: expect.stringMatching(message) }),
    );
  });

  it.each([
    [{ exchange: 5 }, /`exchange` must be a string/],
    [{ routingKey: 'orders' }, /`routingKey` must be a function of the message/],
    [{ mandatory: 'false' }, /amqpPublisher: mandatory: expected true or false, got "false"/],
    [{ persistent: 1 }, /amqpPublisher: persistent: expected true or false, got 1/],
  ])('amqpPublisher refuses %o', (bad, message) => {
    expect(() => amqpPublisher({ channel, ...(bad as object) })).toThrow(
      expect.objectContaining({ code: 'invalid_options', message: expect.stringMatching(message) }),
    );
  });

  it('still takes the documented values', () => {
    expect(() => natsPublisher({ js, timeoutMs: 2000, subject: (m) => m.topic })).not.toThrow();
    expect(() =>
      amqpPublisher({ channel, exchange: 'events', mandatory: false, persistent: true }),
    ).not.toThrow();
  });
});

describe('natsPublisher confirms only on a PubAck', () => {
  it('fails a publish whose client resolved without a PubAck, instead of a TypeError on reading it', async () => {
    // Arrange: a client whose publish does not wait for the stream (a wrapper around core publish).
    const publisher = natsPublisher({
      js: { publish: async () => undefined } as never,
      headers: () => ({ set: () => undefined }),
    });
    const message: OutboxMessage = {
      id: 'm-1',
      topic: 't',
      key: null,
      payload: new Uint8Array(),
      contentType: 'text/plain',
      headers: {},
      rowId: '1',
      attempt: 1,
      createdAt: 0,
    };

    // Act / Assert
    await expect(publisher.publish(message)).rejects.toThrow(
      /message m-1: the JetStream client's publish resolved without a PubAck/,
    );
  });
});

describe('redisStreamsPublisher options', () => {
  /** A node-redis stand-in that records every command. */
  function recordingClient() {
    const sent: string[][] = [];
    const client = {
      sendCommand: async (args: ReadonlyArray<string | Buffer>) => {
        sent.push(args.map(String));
        return '1-0';
      },
    };
    return { client, sent };
  }
  const message = (topic: string): OutboxMessage => ({
    id: 'm-1',
    topic,
    key: null,
    payload: new Uint8Array([1]),
    contentType: 'application/json',
    headers: {},
    rowId: '1',
    attempt: 1,
    createdAt: 0,
  });

  it.each([
    [
      { stream: 5 },
      /^redisStreamsPublisher: stream: expected a stream name or a function of the message, got 5$/,
    ],
    [{ stream: '' }, /^redisStreamsPublisher: stream: .* got ""$/],
    [{ stream: ['orders'] }, /^redisStreamsPublisher: stream: .* got \["orders"\]$/],
    [{ maxLen: '1000' }, /^redisStreamsPublisher: maxLen: must be a positive integer, got "1000"$/],
    [
      { maxlen: 1000 },
      /^redisStreamsPublisher: unknown field "maxlen"; the fields are client, stream, maxLen$/,
    ],
  ])('refuses %o when created', (bad, message) => {
    const { client } = recordingClient();
    expect(() =>
      redisStreamsPublisher({ client, ...(bad as object) } as RedisStreamsPublisherOptions),
    ).toThrow(
      expect.objectContaining({ code: 'invalid_options', message: expect.stringMatching(message) }),
    );
  });

  it('takes a stream name: every message is appended to that stream', async () => {
    // Arrange
    const { client, sent } = recordingClient();
    const publisher = redisStreamsPublisher({ client, stream: 'orders' });
    // Act
    await publisher.publish(message('payment.initiated'));
    await publisher.publish(message('payment.settled'));
    // Assert
    expect(sent.map((args) => args.slice(0, 2))).toEqual([
      ['XADD', 'orders'],
      ['XADD', 'orders'],
    ]);
  });

  it('takes a function of the message, and defaults (absent or null) to the topic', async () => {
    // Arrange
    const { client, sent } = recordingClient();
    const byKey = redisStreamsPublisher({ client, stream: (m) => `s:${m.topic}` });
    const unset = redisStreamsPublisher({ client, stream: null as never });
    // Act
    await byKey.publish(message('a'));
    await unset.publish(message('b'));
    // Assert
    expect(sent.map((args) => args[1])).toEqual(['s:a', 'b']);
  });
});

describe('natsPublisher and headers NATS cannot carry', () => {
  it('fails the publish naming the header, before anything is sent', async () => {
    // Arrange: the real NATS headers; a name with a space, which RabbitMQ would carry.
    const { headers } = await import('@nats-io/transport-node');
    let sent = 0;
    const publisher = natsPublisher({
      js: {
        publish: async () => {
          sent++;
          return { duplicate: false, seq: 1, stream: 's' };
        },
      } as never,
      headers,
    });
    const message = {
      id: 'm-1',
      topic: 'orders',
      key: null,
      payload: new Uint8Array(),
      contentType: 'application/json',
      headers: { 'x-trace id': 'a' },
      rowId: '1',
      attempt: 1,
      createdAt: 0,
    };
    // Act / Assert
    await expect(publisher.publish(message)).rejects.toThrow(
      /NATS cannot carry header "x-trace id" of message m-1/,
    );
    expect(sent).toBe(0);
  });
});
