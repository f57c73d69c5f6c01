/**
 * An error as OpenTelemetry's `exception.*` attributes (semantic conventions), for span events.
 * @module
 */
import type { Attributes } from '@opentelemetry/api';

/** `exception.type` and `exception.message` of `error` (only the message for a thrown non-Error). */
export function errorAttributes(error: unknown): Attributes {
  if (error instanceof Error) {
    return { 'exception.type': error.name, 'exception.message': error.message };
  }
  return { 'exception.message': String(error) };
}
