/**
 * The small structural slice of amqplib this adapter uses, so it works with any amqplib version that has
 * the promise channel API (0.10, 1.x, 2.x) without importing the library.
 * @module
 */

/** Message properties the adapter reads and copies (amqplib `MessageProperties`). */
export interface AmqpMessageProperties {
  messageId?: unknown;
  /** The publisher's user, validated by RabbitMQ against the connection that published the message. */
  userId?: unknown;
  headers?: Record<string, unknown> | undefined;
}

/** A delivered message (amqplib `ConsumeMessage`). */
export interface AmqpMessage {
  content: Buffer;
  fields: { deliveryTag: number; redelivered: boolean; exchange: string; routingKey: string };
  properties: AmqpMessageProperties;
}

/** Publish options the adapter sets (amqplib `Options.Publish`). */
export interface AmqpPublishOptions {
  headers?: Record<string, unknown>;
  expiration?: string | number;
  /** AMQP `delivery-mode`: 2 is persistent (written to disk by a durable classic queue), 1 transient. */
  deliveryMode?: number;
  messageId?: string;
  /** Have the broker return the message (`basic.return`) when no queue takes it. */
  mandatory?: boolean;
}

/** A message the broker sent back with `basic.return` (amqplib's `'return'` event). */
export interface AmqpReturnedMessage {
  content: Buffer;
  fields: { replyCode?: number; replyText?: string; exchange?: string; routingKey?: string };
  properties: AmqpMessageProperties;
}

/**
 * A **confirm** channel (amqplib `ConfirmChannel`, from `connection.createConfirmChannel()`): a copy sent
 * to the retry or dead-letter queue must be confirmed by the broker before the original is acked,
 * otherwise a crash in between would lose the message.
 */
export interface AmqpConfirmChannel {
  assertQueue(queue: string, options?: object): Promise<unknown>;
  /** Fails (and the broker closes the channel) when `queue` does not exist. */
  checkQueue(queue: string): Promise<unknown>;
  /**
   * A passive declare: fails (and the broker closes the channel) when `exchange` does not exist. A round
   * trip that changes nothing on `amq.direct`.
   */
  checkExchange(exchange: string): Promise<unknown>;
  prefetch(count: number, global?: boolean): Promise<unknown>;
  consume(
    queue: string,
    onMessage: (message: AmqpMessage | null) => void,
    options?: object,
  ): Promise<{ consumerTag: string }>;
  cancel(consumerTag: string): Promise<unknown>;
  ack(message: AmqpMessage, allUpTo?: boolean): void;
  nack(message: AmqpMessage, allUpTo?: boolean, requeue?: boolean): void;
  sendToQueue(
    queue: string,
    content: Buffer,
    options?: object,
    callback?: (error: unknown, ok: unknown) => void,
  ): boolean;
  waitForConfirms(): Promise<void>;
  /** The channel's `'return'` event: a copy published `mandatory` that no queue took. */
  on(event: 'return', listener: (message: AmqpReturnedMessage) => void): unknown;
  /** The channel's `'close'` event: closed by the broker, by its connection, or by the application. */
  on(event: 'close', listener: () => void): unknown;
  removeListener(event: 'return', listener: (message: AmqpReturnedMessage) => void): unknown;
  removeListener(event: 'close', listener: () => void): unknown;
}
