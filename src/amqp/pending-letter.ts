/**
 * A dead letter that could not be written, carried on the retry copy of its message. When the
 * dead-letter queue keeps failing (deleted, or a copy it cannot take), the message is kept through the
 * retry queue; its redelivery reads the letter back and writes it again without running the handler, so a
 * message the consumer gave up on never runs again however long the dead-letter queue stays broken.
 * @module
 */
import { type DeadLetter, DeadLetterReason } from '../consumer/index.js';
import type { AmqpMessage } from './amqp-types.js';

/** On a retry copy: the dead letter decided on but not yet written, as JSON. */
export const PENDING_DEAD_LETTER_HEADER = 'x-idempotency-pending-dead-letter';

const REASONS = new Set<string>(Object.values(DeadLetterReason));

/** The header value recording `letter` (its error is already bounded by `describeError`). */
export function pendingLetterHeader(letter: DeadLetter): string {
  return JSON.stringify(letter);
}

/** The dead letter `message` carries, if any; a value that is not a whole letter is ignored. */
export function pendingDeadLetter(message: AmqpMessage): DeadLetter | undefined {
  const raw = message.properties.headers?.[PENDING_DEAD_LETTER_HEADER];
  if (raw === undefined || raw === null) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(Buffer.isBuffer(raw) ? raw.toString('utf8') : String(raw));
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const letter = value as Partial<DeadLetter>;
  const error = letter.error as Partial<DeadLetter['error']> | undefined;
  const valid =
    typeof letter.consumer === 'string' &&
    (letter.key === undefined || typeof letter.key === 'string') &&
    typeof letter.reason === 'string' &&
    REASONS.has(letter.reason) &&
    typeof error?.name === 'string' &&
    typeof error.message === 'string' &&
    (error.code === undefined || typeof error.code === 'string') &&
    Number.isSafeInteger(letter.deliveryCount) &&
    typeof letter.failedAt === 'string';
  return valid ? (letter as DeadLetter) : undefined;
}
