/**
 * Replies on a closed NATS connection. A received message replies (`ack`, `nak`, `term`, `working`)
 * through the client's protocol layer, which does not check whether the connection is still open: on a
 * closed one the reply is dropped in silence. The consumer then took an ack that never reached the server
 * for a success (`onExecuted`), and kept a message waiting for a slot "alive" with `working()` calls that
 * went nowhere, while its message loop, with no pull open, could not tell the connection was gone.
 * @module
 */
import type { NatsPullConsumer } from './nats-types.js';

/**
 * A reply that could not be sent: the consumer's NATS connection is closed. Named as the NATS client's
 * own error for a closed connection, so that code handling that error handles this one too.
 */
export class NatsConnectionClosedError extends Error {
  override readonly name = 'ClosedConnectionError';

  constructor() {
    super('the NATS connection is closed: the reply was not sent');
  }
}

/**
 * A check to call before each reply on `consumer`'s messages: throws {@link NatsConnectionClosedError}
 * once its connection is closed. A consumer object that does not expose its connection is never known
 * closed (the check does nothing).
 */
export function openConnectionCheck(consumer: NatsPullConsumer): () => void {
  const connection = consumer.api?.nc;
  if (connection?.isClosed === undefined) return () => {};
  return () => {
    if (connection.isClosed?.() === true) throw new NatsConnectionClosedError();
  };
}
