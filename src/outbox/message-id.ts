/**
 * The rule an outbox message id must follow: the key rule (1–255 printable ASCII characters) that every
 * idempotent consumer of this package applies to the key it reads from the message.
 *
 * Why: the id is what each publisher sends as the message's key (AMQP `message-id`, `Nats-Msg-Id`, the
 * Redis Streams `x-idempotency-key` field) and what each consumer deduplicates on. An id outside the rule
 * was committed and published, and then never handled: the AMQP, NATS and Redis Streams consumers
 * dead-lettered every delivery of it as `invalid_key` (an id with a `ü` in it, say), and the NATS
 * publisher could not send one with a line break at all (the row failed every attempt, for ever). Refused
 * at `enqueue`, inside the caller's transaction, the request fails instead of its downstream effect.
 * @module
 */
import { InvalidOptionsError, isInvalidKeyError } from '../core/errors.js';
import { validateKey } from '../core/key.js';

/**
 * Check a message id given to `enqueue`.
 * @throws InvalidOptionsError when it is not 1–255 printable ASCII characters (0x20–0x7E).
 */
export function checkMessageId(messageId: unknown): asserts messageId is string {
  try {
    validateKey(messageId);
  } catch (error) {
    if (!isInvalidKeyError(error)) throw error;
    throw new InvalidOptionsError(
      `enqueue: messageId ${error.reason}: it is the key ` +
        "every idempotent consumer deduplicates on (this package's consumers take 1-255 printable ASCII " +
        "characters), e.g. ctx.downstreamKey('payment.initiated'), or a digest of your own id",
      { cause: error },
    );
  }
}
