/**
 * The assertions the conformance checks make of a record a store returns. A failed one names what the
 * check expected, so a store's author reads which rule the store broke, not only that two values differ.
 * @module
 */
import assert from 'node:assert/strict';
import type { IdempotencyRecord } from '../core/record.js';

/** Assert that `record` is in progress (a live claim, or a dead one `inspect` shows), and return it as one. */
export function assertInProgress(record: IdempotencyRecord | undefined, message: string) {
  assert.ok(record, `${message}: expected a record`);
  assert.equal(record.status, 'in_progress', message);
  return record as Extract<IdempotencyRecord, { status: 'in_progress' }>;
}

/** Assert that `record` is completed (holds an outcome), and return it as one. */
export function assertCompleted(record: IdempotencyRecord | undefined, message: string) {
  assert.ok(record, `${message}: expected a record`);
  assert.equal(record.status, 'completed', message);
  return record as Extract<IdempotencyRecord, { status: 'completed' }>;
}

/**
 * Assert that two byte arrays are equal. Compares lengths first, so a truncated outcome reads as one
 * instead of as a megabyte-long diff of two buffers.
 */
export function assertBytesEqual(actual: Uint8Array, expected: Uint8Array, message: string) {
  assert.equal(actual.byteLength, expected.byteLength, `${message}: length`);
  assert.ok(Buffer.from(actual).equals(Buffer.from(expected)), `${message}: bytes differ`);
}
