/**
 * Setting the idle time of pending entries (a retry's delay, a long handler's idle reset, `close()` handing
 * entries back): they are re-owned by this consumer and a claim round takes them once idle reaches
 * `minIdle`. Through scripts/set-idle-1.lua, which tells an entry settled elsewhere (no longer pending:
 * nothing to do) from one deleted while pending (returned, left pending for its letter to ack); where Redis
 * refuses the script, an `XPENDING` per id, `XCLAIM` of those still pending and an `XRANGE` per id it did
 * not claim, which tell them apart too (but for an ack and a trim landing between two of the commands).
 * @module
 */
import { loadScript } from '../redis/script-runner.js';
import type { StreamsContext } from './consumer-context.js';
import { isPending } from './pending-entry.js';
import { command } from './redis-client.js';
import { isScriptRefused } from './redis-errors.js';
import { setIdle as setIdleScript } from './scripts.gen.js';

// Its SHA1, computed once: each call is an EVALSHA (script-call.ts).
const SET_IDLE_SCRIPT = loadScript(setIdleScript);

/** What one delivery knows of its entry beyond the entry itself. */
export interface HeldEntry {
  /**
   * The entry was deleted from the stream while this delivery held it (a reset of its idle time found it
   * gone): its fields are only in this process now. Its idle time is no longer reset.
   */
  deleted: boolean;
  /**
   * And this delivery's own `XCLAIM` (no set-idle script) dropped it from the pending list: no script can
   * write its letter (it writes only for a pending id), and there is nothing left to ack.
   */
  dropped: boolean;
  /**
   * A retry set its idle time for the redelivery: no idle reset may follow (the keep-alive runs until
   * the settle ended, and a dead letter whose write failed is retried from within it).
   */
  retried: boolean;
}

/** Ids a reset of idle times found deleted while pending. */
export interface FoundDeleted {
  /** The ids, in order. */
  deleted: string[];
  /** Still pending (the set-idle script leaves them so), or dropped by Redis 7's `XCLAIM`. */
  pending: boolean;
}

/** The idle-time setters of one consumer. */
export interface IdleTimes {
  /**
   * Re-own `ids` and set their idle time to `idleMs`; resolves to the ids found deleted while still
   * pending: this process's to report.
   */
  setIdle(ids: string[], idleMs: number): Promise<FoundDeleted>;
  /** A held entry's idle time set, unless it was found deleted before (it then stays so). */
  setHeldIdle(id: string, held: HeldEntry, idleMs: number): Promise<void>;
}

/** The idle-time setters of the consumer of `context`. */
export function idleTimes(context: StreamsContext): IdleTimes {
  const { client, runScript } = context;
  const { stream, group, consumer } = context.options;
  // Whether idle times are set through scripts/set-idle-1.lua: until Redis refuses to run it
  // (isScriptRefused), then what it does as separate commands: XPENDING per id, XCLAIM of those pending,
  // and an XRANGE for each it did not claim.
  let scriptedIdle = true;
  // Re-own `ids` and set their idle time: a claim round takes them once idle reaches `minIdle`. JUSTID keeps
  // the delivery counts as they are. Resolves to the ids found deleted while still pending: this process's
  // to report. The script leaves them pending (`pending`), for their letter to ack (deleted-letters.ts);
  // Redis 7's XCLAIM, without the script, has dropped them. An id no longer pending was settled by another
  // consumer (reclaimed, run, acked), deleted since or not: nothing to report, with the script or without.
  const setIdle = async (ids: string[], idleMs: number): Promise<FoundDeleted> => {
    if (scriptedIdle) {
      try {
        const reply = await runScript(
          SET_IDLE_SCRIPT,
          [stream],
          [group, consumer, String(idleMs), ...ids],
        );
        return { deleted: Array.isArray(reply) ? reply.map(String) : [], pending: true };
      } catch (error) {
        if (!isScriptRefused(error)) throw error;
        scriptedIdle = false;
      }
    }
    // An id no longer pending was settled by another consumer: nothing to do, as the script decides. Asked
    // before the XCLAIM, which (Redis 7) drops a deleted id from the pending list: after it, an entry
    // settled elsewhere and trimmed since looked deleted, and was reported and dead-lettered (pending-entry.ts).
    const stillPending = await Promise.all(ids.map((id) => isPending(client, stream, group, id)));
    const held = ids.filter((_, index) => stillPending[index]);
    if (held.length === 0) return { deleted: [], pending: false };
    const reply = await command(client, [
      'XCLAIM',
      stream,
      group,
      consumer,
      '0',
      ...held,
      'IDLE',
      String(idleMs),
      'JUSTID',
    ]);
    // A reply of another form: nothing more to look at.
    if (!Array.isArray(reply)) return { deleted: [], pending: false };
    const claimed = new Set(reply.map(String));
    const deleted: string[] = [];
    for (const id of held) {
      if (claimed.has(id)) continue;
      // Pending a moment ago, not claimed now: deleted (XCLAIM has dropped the id), or acked by another
      // consumer in between. Its entry still there tells the latter; gone, it is taken for deleted, which it
      // is but for an ack and a trim both landing between the two commands (see the docs).
      const found = await command(client, ['XRANGE', stream, id, id]);
      if (Array.isArray(found) && found.length === 0) deleted.push(id);
    }
    return { deleted, pending: false };
  };
  const setHeldIdle = async (id: string, held: HeldEntry, idleMs: number): Promise<void> => {
    if (held.deleted) return;
    const found = await setIdle([id], idleMs);
    if (found.deleted.length === 0) return;
    held.deleted = true;
    held.dropped = !found.pending;
  };
  return { setIdle, setHeldIdle };
}
