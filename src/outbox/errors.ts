/**
 * Mapping backend failures to the core's `StoreUnavailableError` (fail closed), keeping the driver's error
 * as `cause`.
 * @module
 */
import { isIdempotencyError, StoreUnavailableError } from '../core/errors.js';

/** Wrap a database failure during `operation`; idempotency-kit errors pass through unchanged. */
export function outboxStoreError(operation: string, error: unknown): Error {
  if (isIdempotencyError(error)) return error;
  const code =
    typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : undefined;
  const message = error instanceof Error ? error.message : String(error);
  const hint =
    code === '42P01' || /no such table/.test(message) ? ' (run migrateOutbox() first)' : '';
  return new StoreUnavailableError(
    `outbox: ${operation} failed${code === undefined ? '' : ` (${code})`}: ${message}${hint}`,
    { cause: error },
  );
}

/** A short, single-line description of a publish failure, as stored in `last_error`. */
export function describeError(error: unknown): string {
  const text =
    error instanceof Error
      ? `${error.name}: ${error.message}`
      : `non-error thrown: ${String(error)}`;
  return text.length > 1000 ? `${text.slice(0, 1000)}…` : text;
}
