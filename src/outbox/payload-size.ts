/**
 * The largest payload `enqueue` stores: a row the relay could never read back, or that no broker would
 * take, is refused inside the caller's transaction instead of being committed and retried for ever.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import { positiveIntegerOption } from '../core/option-checks.js';

/**
 * The default `maxPayloadBytes`: 128 MiB, the default `max_message_size` of RabbitMQ 3.8 to 3.13 (above
 * it the broker closes the channel on the publish); RabbitMQ 4.0 lowered it to 16 MiB. Redis Streams
 * carry up to 512 MB, NATS only its `max_payload` (1 MiB by default, 64 MiB at most): set `maxPayloadBytes` to your broker's limit to be told at
 * `enqueue` rather than by `onPublishFailed` on every retry.
 */
export const DEFAULT_MAX_PAYLOAD_BYTES = 128 * 1024 * 1024;

/**
 * The largest payload a PostgreSQL relay can read back, whatever `maxPayloadBytes` says: node-postgres
 * receives a `bytea` as hex text (`\x` and two characters a byte), and V8 cannot make a string of more
 * than 536,870,888 characters. A larger row failed the claim after the claim had committed: that row, and
 * the rest of its batch, stayed claimed, and came back only to fail the same way after every lease.
 */
export const MAX_POSTGRES_PAYLOAD_BYTES = Math.floor((536_870_888 - 2) / 2);

/** `maxPayloadBytes` from the options, checked: a positive integer. */
export function maxPayloadBytesOption(value: unknown): number {
  return positiveIntegerOption(value, 'enqueue: maxPayloadBytes', DEFAULT_MAX_PAYLOAD_BYTES);
}

/**
 * Refuse a payload over `limit` bytes (or, on PostgreSQL, over what the relay can read back).
 * @throws InvalidOptionsError naming the payload's size and the limit.
 */
export function checkPayloadSize(bytes: number, limit: number, postgres: boolean): void {
  if (postgres && bytes > MAX_POSTGRES_PAYLOAD_BYTES) {
    throw new InvalidOptionsError(
      `enqueue: payload is ${bytes} bytes, over the ${MAX_POSTGRES_PAYLOAD_BYTES} bytes a PostgreSQL relay can read back (node-postgres reads bytea as hex text, and a JavaScript string holds at most 536,870,888 characters); store it elsewhere and enqueue a reference`,
    );
  }
  if (bytes > limit) {
    throw new InvalidOptionsError(
      `enqueue: payload is ${bytes} bytes, over maxPayloadBytes (${limit}); raise maxPayloadBytes if your broker takes it, or store the data elsewhere and enqueue a reference`,
    );
  }
}
