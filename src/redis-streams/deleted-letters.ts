/**
 * How an entry deleted while pending is recorded in the dead-letter stream, acked and reported
 * (deleted-entries.ts says why). Three shapes, each with its own order of letter, ack and report:
 *
 * - a script left the id pending (scripts/reclaim-1.lua, scripts/set-idle-1.lua): the letter and the ack
 *   as one script (letter-script.ts), which writes only while the id is pending; the report waits for its
 *   answer (at most `brokerTimeout`), so that of two consumers that found the id at once only the one
 *   that wrote the letter reports it;
 * - this delivery's own `XCLAIM` dropped it (Redis 7, no set-idle script): its letter, as decided, by
 *   `XADD` alone, nothing left to ack; a write that fails is looked for before it is recorded again;
 * - no scripts (refused, or the id perhaps dropped by `XAUTOCLAIM`): reported at once, then `XADD` and
 *   `XACK`, letter before ack, so that a failed `XACK` leaves the id pending (Redis 6.2).
 * @module
 */
import type { DeadLetter } from '../consumer/index.js';
import type { StreamsContext } from './consumer-context.js';
import { deletedLetterFields, EntryDeletedError, storedFields } from './deleted-entries.js';
import { letterAdd } from './letter-add.js';
import type { AtomicLetter } from './letter-script.js';
import { letterWritten } from './letter-written.js';
import { type CommandArgument, command, type StreamEntry } from './redis-client.js';

/** The deleted-entry path of one consumer. */
export interface DeletedLetters {
  /**
   * An entry deleted while pending: reported, unless another consumer recorded it first, and recorded in
   * the dead-letter stream, with its fields when this process holds them (`entry`), and acked with it
   * (`pending`: the id was left pending by a script). Rejects, reported too, if it cannot be recorded.
   */
  reportDeleted(id: string, pending: boolean, entry?: StreamEntry): Promise<void>;
  /**
   * The dead letter `letter` (its `fields`) of `entry`, deleted while this delivery held it and dropped
   * from the pending list by its own `XCLAIM`: written by `XADD` alone. Rejects when it was not written.
   */
  writeDroppedLetter(
    entry: StreamEntry,
    letter: DeadLetter,
    fields: CommandArgument[],
  ): Promise<undefined>;
}

/** The deleted-entry path of the consumer of `context`, its scripted letters written by `atomicLetter`. */
export function deletedLetters(
  context: StreamsContext,
  atomicLetter: AtomicLetter,
): DeletedLetters {
  const { client, reportError, ack } = context;
  const { stream, deadLetterStream, resolved } = context.options;
  // The letter of entry `id`, deleted while pending, and its ack: as one script where a script left the id
  // pending (`pending`); otherwise (the id perhaps dropped by Redis 7's XCLAIM or XAUTOCLAIM, or the script
  // refused) XADD then XACK, letter before ack, so a failed XACK leaves the id pending (Redis 6.2) and a
  // later round may write a second letter. Resolves to false when the script found the id no longer
  // pending (another consumer recorded it first): nothing written.
  const writeDeletedLetter = async (
    id: string,
    fields: CommandArgument[],
    pending: boolean,
  ): Promise<boolean> => {
    const written = pending ? await atomicLetter(id, fields) : undefined;
    if (written !== undefined) return written;
    await command(client, letterAdd(context.options, fields));
    await ack(id);
    return true;
  };

  const reportDeleted = async (
    id: string,
    pending: boolean,
    entry?: StreamEntry,
  ): Promise<void> => {
    const error = new EntryDeletedError(stream, id);
    let reported = false;
    const report = () => {
      if (reported) return;
      reported = true;
      reportError('deleted', error, id);
    };
    // Left pending by a script, the id is recorded by one script run only (dead-letter-2.lua): the report
    // waits for its answer, so that of two consumers whose claim rounds found the id at once only the one
    // that wrote the letter reports it (both did, for one letter). Not past brokerTimeout, nor for two
    // commands that cannot tell: the report must not wait for a write that may hang or fail.
    const timer = pending ? setTimeout(report, resolved.brokerTimeoutMs) : undefined;
    timer?.unref?.();
    if (!pending) report();
    const fields = deletedLetterFields(
      error,
      resolved.name,
      entry === undefined ? undefined : storedFields(entry),
    );
    try {
      if (await writeDeletedLetter(id, fields, pending)) report();
    } catch (writeError) {
      report();
      reportError('deleted', writeError, id);
      throw writeError;
    } finally {
      clearTimeout(timer);
    }
  };

  const writeDroppedLetter = async (
    entry: StreamEntry,
    letter: DeadLetter,
    fields: CommandArgument[],
  ): Promise<undefined> => {
    // No other delivery of it can come, and the script, finding it not pending, would write nothing. Its
    // fields are only here: written as the letter decided on; nothing left to ack. (Found deleted by the
    // script, it is still pending: its letter goes as any, and acks it.)
    const started = performance.now();
    try {
      await command(client, letterAdd(context.options, fields));
    } catch (error) {
      // An error is not always a refusal: a connection reset after Redis ran the XADD, or the client's
      // own command timeout (ioredis `commandTimeout`) rejecting while Redis still runs it, leaves the
      // letter written. Taken for not written, it was recorded again (below, or by the settle's retry):
      // two letters for one entry. So it is looked for first (letter-written.ts); sent after the XADD on
      // the same connection, the look sees it if it ever reached Redis (not so across a pool's
      // connections). A look that fails too tells nothing: recorded as before, rather than lost.
      if (await letterWritten(client, deadLetterStream, entry.id, letter).catch(() => false)) {
        return undefined;
      }
      // Failed in time, the settle's retry records it (reportDeleted). Failed after the settle gave up
      // on it (brokerTimeout), no retry follows, and no redelivery can come: recorded here the same way,
      // instead of lost with only an onBrokerError. (A failure of that record is reported by it.)
      if (performance.now() - started >= resolved.brokerTimeoutMs) {
        await reportDeleted(entry.id, false, entry).catch(() => undefined);
      }
      throw error;
    }
    return undefined;
  };

  return { reportDeleted, writeDroppedLetter };
}
