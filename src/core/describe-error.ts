/**
 * What is recorded of a thrown value — in a stored error outcome, in a consumer's dead letter — its name,
 * message and string code, bounded in size. Total: it never throws, whatever was thrown, because the key
 * or the delivery it describes must still be settled.
 * @module
 */
import type { StoredErrorInfo } from './errors.js';

/**
 * Longest recorded `message`, in UTF-16 code units. A dead letter carries the error in a header, and a
 * RabbitMQ header table must fit 64 KB: 4,096 characters stay far below it even as escaped JSON in UTF-8.
 */
export const MAX_ERROR_MESSAGE_LENGTH = 4096;
/** Longest recorded `name` and `code`, in UTF-16 code units. */
export const MAX_ERROR_NAME_LENGTH = 256;

/**
 * Cut `text` to `max` code units (without splitting a surrogate pair) and say how much was left out, so
 * that a reader of the dead letter knows the text is not whole.
 */
export function truncateText(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}… [truncated, ${text.length - end} more characters]`;
}

// String() throws for a null-prototype object, a Symbol.toPrimitive that throws, or a revoked Proxy.
function safeString(value: unknown): string {
  try {
    return String(value);
  } catch {
    try {
      return Object.prototype.toString.call(value);
    } catch {
      return '[unprintable value]';
    }
  }
}

// A plain object such as `{ code, message }` says more as JSON than as "[object Object]".
function describeValue(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && value !== null) {
    try {
      const json = JSON.stringify(value);
      if (typeof json === 'string') return json;
    } catch {
      // A cycle, a BigInt or a throwing toJSON: fall back to its string form.
    }
  }
  return safeString(value);
}

// Reading a property can run a getter (or a Proxy trap) that throws.
function read(value: object, name: string): unknown {
  try {
    return (value as Record<string, unknown>)[name];
  } catch {
    return undefined;
  }
}

// `instanceof` runs a Proxy's getPrototypeOf trap, which may throw.
function isError(value: unknown): value is Error {
  try {
    return value instanceof Error;
  } catch {
    return false;
  }
}

function bounded(name: unknown, message: string, code: unknown): StoredErrorInfo {
  const info: StoredErrorInfo = {
    name: truncateText(typeof name === 'string' ? name : 'NonError', MAX_ERROR_NAME_LENGTH),
    message: truncateText(message, MAX_ERROR_MESSAGE_LENGTH),
  };
  if (typeof code === 'string') info.code = truncateText(code, MAX_ERROR_NAME_LENGTH);
  return info;
}

/**
 * The name, message and string code of any thrown value, as stored with an error outcome and recorded
 * with a dead letter. An `Error`
 * gives its own; a string is the message; any other object is described as JSON (its `code` kept when it
 * is a string), anything else by its string form. The message is cut to
 * {@link MAX_ERROR_MESSAGE_LENGTH} characters and the name and code to {@link MAX_ERROR_NAME_LENGTH},
 * ending in `… [truncated, N more characters]`. Never throws.
 */
export function describeError(error: unknown): StoredErrorInfo {
  if (isError(error)) {
    const message = read(error, 'message');
    return bounded(
      read(error, 'name'),
      typeof message === 'string' ? message : describeValue(message),
      read(error, 'code'),
    );
  }
  const code = typeof error === 'object' && error !== null ? read(error, 'code') : undefined;
  return bounded('NonError', describeValue(error), code);
}
