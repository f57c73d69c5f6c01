/**
 * The default idempotency key of a stream entry: its `x-idempotency-key` field, else the stream and the
 * entry id. An entry carrying the key field twice with different values has no key anyone can trust, and
 * is refused (dead-lettered `invalid_key`) rather than keyed by one of them.
 * @module
 */
import type { StreamEntry } from './redis-client.js';

/** The default key field. */
export const KEY_FIELD = 'x-idempotency-key';

/**
 * The default key: the `x-idempotency-key` field, else the stream and the entry id (`orders:1700000000000-0`,
 * which dedups redeliveries of that entry only). The stream is part of it because entry ids are given out
 * per stream: two streams hand out the same ids (entries added in the same millisecond), and a consumer
 * name reused on a second stream acknowledged its entry as a duplicate of the first's, never running it.
 */
export function defaultStreamKey(entry: StreamEntry): string | undefined {
  if (entry.pairs !== undefined) refuseConflictingKeys(entry.pairs);
  return entry.fields[KEY_FIELD] ?? `${entry.stream}:${entry.id}`;
}

/**
 * Throws when the key field occurs with two different values (`XADD s * x-idempotency-key a
 * x-idempotency-key b`): keyed by its last one, as the entry's `fields` have it, it ran as message `b` and
 * was acked as a duplicate if `b` had run, though the producer may have meant `a`. Such an entry is
 * dead-lettered instead (`invalid_key`), with its fields, all of them.
 */
function refuseConflictingKeys(pairs: ReadonlyArray<readonly [string, Buffer]>): void {
  let key: Buffer | undefined;
  for (const [name, value] of pairs) {
    if (name !== KEY_FIELD) continue;
    if (key !== undefined && !key.equals(value)) {
      throw new Error(
        `The entry has the field '${KEY_FIELD}' more than once, with different values: which one is its idempotency key is unknown`,
      );
    }
    key = value;
  }
}
