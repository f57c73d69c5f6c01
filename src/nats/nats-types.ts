/**
 * The structural slice of `@nats-io/jetstream` (v3) this adapter uses, so the library is never imported at
 * runtime here (the dead-letter headers load `@nats-io/transport-node` lazily).
 * @module
 */

/** Message headers (`MsgHdrs`). */
export interface NatsHeaders extends Iterable<[string, string[]]> {
  get(key: string): string;
  set(key: string, value: string): void;
  has(key: string): boolean;
}

/** A JetStream message (`JsMsg`). */
export interface NatsJsMsg {
  subject: string;
  data: Uint8Array;
  headers: NatsHeaders | undefined;
  seq: number;
  info: { deliveryCount: number; stream: string; streamSequence: number; timestampNanos?: number };
  ack(): void;
  nak(millis?: number): void;
  working(): void;
  term(reason?: string): void;
}

/** The iterator `consumer.fetch()` returns (`ConsumerMessages`). */
export interface NatsConsumerMessages extends AsyncIterable<NatsJsMsg> {
  close(): Promise<unknown>;
}

/**
 * What the adapter reads of a JetStream consumer's configuration (`ConsumerConfig`; durations in
 * nanoseconds), checked when it starts (consumer-config.ts).
 */
export interface NatsConsumerConfig {
  ack_policy?: string;
  ack_wait?: number;
  /** Redelivery schedule: delivery `n`'s answer window is `backoff[n-1]` (see server-backoff.ts). */
  backoff?: number[];
  max_deliver?: number;
  max_batch?: number;
  max_expires?: number;
  filter_subject?: string;
  filter_subjects?: string[];
}

/** A pull consumer (`js.consumers.get(stream, name)`). */
export interface NatsPullConsumer {
  fetch(options?: { max_messages?: number; expires?: number }): Promise<NatsConsumerMessages>;
  info(cached?: boolean): Promise<{ stream_name?: string; config: NatsConsumerConfig }>;
  /**
   * The JetStream API the consumer was got through (`@nats-io/jetstream` sets it): read for the server's
   * version, which decides whether `term()` may carry a reason (absent: `term()` without one), and for
   * whether the connection closed (absent: never known closed), and for the stream that captures the
   * dead-letter subject (absent: not checked).
   */
  api?: {
    nc?: { features?: { require(version: string): boolean }; isClosed?(): boolean };
    findStream?(subject: string): Promise<string>;
  };
}

/** What publishes dead letters: a JetStream client (`jetstream(nc)`), awaited for its PubAck. */
export interface NatsPublisher {
  publish(
    subject: string,
    payload?: Uint8Array,
    options?: { headers?: NatsHeaders },
  ): Promise<unknown>;
}
