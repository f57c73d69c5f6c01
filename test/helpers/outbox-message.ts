/**
 * A claimed outbox message for publisher tests, as a relay would hand it over.
 * @module
 */
import { randomBytes } from 'node:crypto';
import type { OutboxMessage } from '../../src/outbox/index.js';

/** A message with a fresh id starting with `prefix` (row 1, first attempt), `fields` overriding the rest. */
export function outboxMessage(prefix: string, fields: Partial<OutboxMessage> = {}): OutboxMessage {
  return {
    id: `${prefix}-${randomBytes(4).toString('hex')}`,
    topic: 'outbox.test',
    key: null,
    payload: new Uint8Array(),
    contentType: 'application/octet-stream',
    headers: {},
    rowId: '1',
    attempt: 1,
    createdAt: Date.now(),
    ...fields,
  };
}
