/**
 * Saying why NATS refused a message for its size: the client's own error names neither the size nor the
 * limit, and the row fails with it on every retry.
 * @module
 */
import type { OutboxMessage } from './message.js';

// What @nats-io/nats-core throws (an InvalidArgumentError, before sending anything) when the payload plus
// the encoded headers exceed the `max_payload` the server announced in its INFO.
const MAX_PAYLOAD_EXCEEDED = /max_payload size exceeded/;

/**
 * `error` restated with the message's size and the server's limit when it is the client's
 * `max_payload` refusal; any other error is returned as it is.
 * @param js the JetStream client: `jetstream(nc)` keeps the connection as `nc`, whose `info.max_payload`
 *   is the limit (left out of the text when the client does not expose it).
 * @param headers the headers object that was published (the client adds `Nats-Msg-Id` to it); its
 *   encoded length counts towards the limit.
 */
export function natsPayloadError(
  error: unknown,
  message: OutboxMessage,
  js: object,
  headers: unknown,
): unknown {
  if (!(error instanceof Error) || !MAX_PAYLOAD_EXCEEDED.test(error.message)) return error;
  const limit = (js as { nc?: { info?: { max_payload?: unknown } } }).nc?.info?.max_payload;
  const encode = (headers as { encode?: unknown } | null)?.encode;
  const headerBytes =
    typeof encode === 'function' ? (encode.call(headers) as Uint8Array).length : undefined;
  const size =
    `${message.payload.byteLength} bytes of payload` +
    (headerBytes === undefined ? '' : ` and ${headerBytes} bytes of headers`);
  const over =
    typeof limit === 'number'
      ? `the server's max_payload of ${limit} bytes`
      : "the server's max_payload";
  return new Error(
    `NATS refused message ${message.id}: ${size}, over ${over} (headers count towards it); raise ` +
      "the server's max_payload (64 MiB at most), or store the data elsewhere and enqueue a reference",
    { cause: error },
  );
}
