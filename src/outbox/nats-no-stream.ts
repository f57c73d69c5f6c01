/**
 * Saying why JetStream did not acknowledge a publish nobody answered: the client reports it as
 * `JetStreamNotEnabled: jetstream is not enabled`, which sends an operator to the server's configuration when
 * the usual cause is a subject that no stream captures.
 * @module
 */
import type { OutboxMessage } from './message.js';

/**
 * `error` restated with the subject when it is a publish that no JetStream stream answered ("no responders",
 * status 503); any other error is returned as it is. The original stays as the `cause`.
 * @param subject the subject the message was published to.
 */
export function natsNoStreamError(
  error: unknown,
  message: OutboxMessage,
  subject: string,
): unknown {
  if (!noResponders(error)) return error;
  return new Error(
    `NATS JetStream did not store message ${message.id}: nobody answered the publish to subject ` +
      `${JSON.stringify(subject)}, most often because no stream captures it. Add the subject to a ` +
      "stream's subjects, or change the publisher’s `subject`; if no stream answers any subject, " +
      'JetStream is not enabled on the server or account, or is unavailable (no leader)',
    { cause: error },
  );
}

// @nats-io/jetstream throws JetStreamNotEnabled whose cause is a RequestError (isNoResponders()) around a
// NoRespondersError; nats.js v2 throws a NatsError with code '503'. JetStreamNotEnabled alone is not enough:
// the JetStream API also throws it, with an API error as the cause, for an account without JetStream.
function noResponders(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 5; depth++) {
    const candidate = current as Error & { isNoResponders?: unknown; code?: unknown };
    if (candidate.name === 'NoResponders' || candidate.code === '503') return true;
    if (typeof candidate.isNoResponders === 'function' && candidate.isNoResponders() === true) {
      return true;
    }
    current = candidate.cause;
  }
  return false;
}
