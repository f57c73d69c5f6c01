/**
 * A delivery's dead letter: the entry's fields and the letter's, written to the dead-letter stream and the
 * entry acked, as one script where Redis runs it (letter-script.ts), else, for an entry still pending (as the
 * script checks), `XADD` then `XACK`, the letter looked for first by a later delivery than the one that
 * decided it (letter-written.ts). An entry deleted while its delivery held it and dropped from the pending
 * list (by its own `XCLAIM`, or another process's `XAUTOCLAIM`) takes the deleted-entry path
 * (deleted-letters.ts).
 * @module
 */
import { type DeadLetter, NOT_WRITTEN } from '../consumer/index.js';
import type { StreamsContext } from './consumer-context.js';
import { letterFields, storedFields } from './deleted-entries.js';
import type { DeletedLetters } from './deleted-letters.js';
import type { HeldEntry } from './idle-times.js';
import { letterAdd } from './letter-add.js';
import type { AtomicLetter } from './letter-script.js';
import { letterWritten } from './letter-written.js';
import { isEntryGone, isPending } from './pending-entry.js';
import { command, type StreamEntry } from './redis-client.js';

/**
 * Writes `letter` for `entry` (delivered `deliveryCount` times, `held` as its delivery knows it) and acks
 * it; resolves to `NOT_WRITTEN` when a second write of the same letter found it written already.
 */
export type WriteDeadLetter = (
  entry: StreamEntry,
  deliveryCount: number,
  letter: DeadLetter,
  held: HeldEntry,
) => Promise<typeof NOT_WRITTEN | undefined>;

/** The {@link WriteDeadLetter} of the consumer of `context`. */
export function deadLetterWriter(
  context: StreamsContext,
  atomicLetter: AtomicLetter,
  deleted: DeletedLetters,
): WriteDeadLetter {
  const { client, ack } = context;
  const { stream, group, deadLetterStream } = context.options;
  return async (entry, deliveryCount, letter, held) => {
    const fields = letterFields(storedFields(entry), {
      reason: letter.reason,
      error: letter.error,
      deliveries: letter.deliveryCount,
      consumer: letter.consumer,
      failedAt: letter.failedAt,
      entryId: entry.id,
    });
    // Deleted while held, and dropped from the pending list by this delivery's own XCLAIM (no set-idle
    // script): nothing left for the script to write or ack.
    if (held.dropped) return deleted.writeDroppedLetter(entry, letter, fields);
    // One operation, and only for an entry still pending: a second write of the same letter (a
    // redelivery's, or a late one given up on) writes nothing, and says so, that this delivery is not
    // reported as a letter written.
    const written = await atomicLetter(entry.id, fields);
    if (written !== undefined) return written ? undefined : NOT_WRITTEN;
    // Two commands, and, first, what the script checks: an entry no longer pending, still in the stream,
    // was settled by another delivery (its letter written, or acked: executed elsewhere), and gets no
    // letter, reported as a duplicate. (One acked between this look and the XADD still gets it: only the
    // script is atomic.) Gone from the stream, it was deleted while held, and another process's XAUTOCLAIM
    // (no reclaim script) dropped its id and recorded it without its fields: written here with them, as a
    // dropped letter, rather than lost (pending-entry.ts). Unless this decision's own letter is there
    // already (a write retried after its XADD and XACK landed, the entry trimmed since).
    if (!(await isPending(client, stream, group, entry.id))) {
      if (!(await isEntryGone(client, stream, entry.id))) return NOT_WRITTEN;
      if (await letterWritten(client, deadLetterStream, entry.id, letter)) return undefined;
      held.deleted = true;
      held.dropped = true;
      return deleted.writeDroppedLetter(entry, letter, fields);
    }
    // Two commands: an XACK that failed after its XADD landed (or a lost XADD reply, a crash between the
    // two) left the entry pending with its letter written. A later delivery than the one that decided the
    // letter looks for it in the dead-letter stream before writing it again (letter-written.ts); the one
    // that decided it wrote nothing before. Not at most once against a write still in flight (given up on
    // past brokerTimeout) that lands after a redelivery looked: only the script is atomic.
    if (
      deliveryCount <= letter.deliveryCount ||
      !(await letterWritten(client, deadLetterStream, entry.id, letter))
    ) {
      await command(client, letterAdd(context.options, fields));
    }
    await ack(entry.id);
    return undefined;
  };
}
