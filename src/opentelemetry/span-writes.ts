/**
 * How both hook sets write to a span: only to one that records, and errors as OpenTelemetry's
 * `exception.*` attributes (semantic conventions).
 * @module
 */
import type { Attributes, Span } from '@opentelemetry/api';

/**
 * `span` if it records, else `undefined`: callers write with `?.`, so that without a recording span not
 * even the attributes object is built.
 */
export function recording(span: Span | undefined): Span | undefined {
  return span?.isRecording() ? span : undefined;
}

/**
 * `exception.type` and `exception.message` of `error`: an `Error`, or a recorded one (`{ name, message }`,
 * as a consumer's dead letter keeps it); only the message for anything else thrown.
 */
export function errorAttributes(error: unknown): Attributes {
  if (error instanceof Error) {
    return { 'exception.type': error.name, 'exception.message': error.message };
  }
  if (typeof error === 'object' && error !== null) {
    const { name, message } = error as { name?: unknown; message?: unknown };
    if (typeof name === 'string' && typeof message === 'string') {
      return { 'exception.type': name, 'exception.message': message };
    }
  }
  return { 'exception.message': String(error) };
}
