/**
 * How an outcome's bytes are sent to Redis: as a string when that is byte-exact, else as a `Buffer`.
 *
 * Both clients write a string argument as its UTF-8 bytes, so a string decoded from valid UTF-8 reaches
 * Redis as exactly the caller's bytes. It is also much cheaper to send: node-redis encodes a command of
 * strings into one string, but splits it around every `Buffer` argument, and each piece is one more chunk
 * of the socket write (a completeMany of 100 outcomes was some 200 chunks, about a tenth of the store's
 * client CPU); ioredis copies a whole command into a new `Buffer` as soon as one argument is a `Buffer`.
 * @module
 */
import { isUtf8 } from 'node:buffer';
import { bufferView } from '../core/bytes.js';
import type { RedisArg } from './client.js';

// Above this size an outcome goes as a Buffer: decoding it to a string and encoding it again on write
// would cost more than the extra piece of the command.
const MAX_STRING_OUTCOME = 4096;
// Up to this size, an ASCII outcome is turned into a string by a loop, cheaper than any native call.
const MAX_LOOP_OUTCOME = 32;

// `ignoreBOM`: a leading byte-order mark is part of the outcome's bytes and must be kept.
const utf8 = new TextDecoder('utf-8', { ignoreBOM: true });

// The bytes as a string if they are all ASCII (then their UTF-8 encoding is themselves), else undefined.
function asciiText(bytes: Uint8Array, length: number): string | undefined {
  let text = '';
  for (let i = 0; i < length; i++) {
    const byte = bytes[i] as number;
    if (byte > 0x7f) return undefined;
    text += String.fromCharCode(byte);
  }
  return text;
}

/** The outcome as a command argument: a string when that keeps every byte, else a Buffer view. */
export function outcomeArg(bytes: Uint8Array): RedisArg {
  const length = bytes.byteLength;
  // Most outcomes are small (a handler that returns nothing stores 3 bytes).
  if (length <= MAX_LOOP_OUTCOME) {
    const text = asciiText(bytes, length);
    if (text !== undefined) return text;
  }
  if (length <= MAX_STRING_OUTCOME && isUtf8(bytes)) return utf8.decode(bytes);
  return bufferView(bytes);
}
