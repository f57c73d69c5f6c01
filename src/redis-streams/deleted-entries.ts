/**
 * Entries deleted from the stream while pending (`XDEL`, `XTRIM`, `XADD … MAXLEN`): how the consumer
 * reports them instead of dropping them in silence.
 *
 * Why: Redis keeps a deleted entry's id in the group's pending list, with nothing left to deliver. Redis 7's
 * `XAUTOCLAIM` then lists the id apart (its reply's third element) and removes it from the pending list; its
 * `XCLAIM` (a retry's, or a long handler's idle reset) removes it without a word; Redis 6.2 replies with
 * the id and no fields. Either way the message will never be delivered again: it is lost, and the consumer
 * acked such ids without telling anyone, so a payment whose entry a `MAXLEN` cap trimmed while it waited
 * for a retry just never happened. Each one is now reported to `hooks.onConsumerError` (operation
 * `deleted`, an {@link EntryDeletedError} naming the stream and the id) and recorded in the dead-letter
 * stream, where the other messages this consumer gave up on are, as a letter of reason `deleted`: with the
 * entry's fields when this process still held them (a retry meeting the deletion), with none when they were
 * gone before it read them. Only entries idle for `minIdle` are taken for lost by a claim round
 * (scripts/reclaim-1.lua): one a live consumer still handles is its holder's to settle.
 * @module
 */
import { describeError } from '../core/describe-error.js';
import type { CommandArgument, StreamEntry } from './redis-client.js';

/** The dead-letter reason of a letter recording an entry deleted while pending. */
export const DELETED_REASON = 'deleted';

/** An entry deleted from its stream while pending: the message will never be delivered again. */
export class EntryDeletedError extends Error {
  /**
   * @param stream - The stream the entry was deleted from.
   * @param entryId - The deleted entry's id.
   */
  constructor(
    readonly stream: string,
    readonly entryId: string,
  ) {
    super(
      `Entry ${entryId} of stream '${stream}' was deleted (XDEL, XTRIM or XADD MAXLEN) while pending in the group: it will never be delivered again (recorded, unless that write fails, in the dead-letter stream with reason '${DELETED_REASON}')`,
    );
    this.name = 'EntryDeletedError';
  }
}

/**
 * The fields of the letter recording `error`'s entry: the entry's own fields first when this process
 * still holds them (`entry`), then the letter's, as a dead letter's (no `x-idempotency-deliveries`: Redis
 * no longer counts the deliveries of an entry it dropped).
 */
export function deletedLetterFields(
  error: EntryDeletedError,
  consumer: string,
  entryFields: Iterable<readonly [string, Buffer]> = [],
): CommandArgument[] {
  return letterFields(entryFields, {
    reason: DELETED_REASON,
    error: describeError(error),
    consumer,
    failedAt: new Date().toISOString(),
    entryId: error.entryId,
  });
}

/** What a letter in the dead-letter stream says of its entry, besides the entry's own fields. */
export interface LetterHeaders {
  reason: string;
  /** The error, as `describeError` gives it: written as JSON. */
  error: unknown;
  /** Deliveries Redis counted; absent for an entry it dropped. */
  deliveries?: number;
  consumer: string;
  failedAt: string;
  entryId: string;
}

/**
 * The fields of a letter in the dead-letter stream: the entry's own first, as stored (byte for byte, a
 * binary payload is not copied through its UTF-8 text; every field, a repeated name included, in stored
 * order), then the letter's `x-idempotency-*` fields.
 */
export function letterFields(
  entryFields: Iterable<readonly [string, Buffer]>,
  letter: LetterHeaders,
): CommandArgument[] {
  const fields: CommandArgument[] = [];
  for (const [name, value] of entryFields) fields.push(name, value);
  fields.push(
    'x-idempotency-dead-letter-reason',
    letter.reason,
    'x-idempotency-error',
    JSON.stringify(letter.error),
  );
  if (letter.deliveries !== undefined) {
    fields.push('x-idempotency-deliveries', String(letter.deliveries));
  }
  fields.push(
    'x-idempotency-consumer',
    letter.consumer,
    'x-idempotency-failed-at',
    letter.failedAt,
    'x-idempotency-entry-id',
    letter.entryId,
  );
  return fields;
}

/** The fields of `entry` as stored, in order, duplicate names included (see `StreamEntry.pairs`). */
export function storedFields(entry: StreamEntry): Iterable<readonly [string, Buffer]> {
  return entry.pairs ?? Object.entries(entry.buffers);
}
