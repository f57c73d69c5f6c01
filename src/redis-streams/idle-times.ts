/**
 * Setting the idle time of pending entries (a retry's delay, a long handler's idle reset, `close()` handing
 * entries back): they are re-owned by this consumer and a claim round takes them once idle reaches
 * `minIdle`. Through scripts/set-idle-1.lua, which tells an entry settled elsewhere (no longer pending:
 * nothing to do) from one deleted while pending (returned, left pending for its letter to ack); where Redis
 * refuses the script, `XCLAIM` and an `XRANGE` per id not claimed: an entry still there was settled
 * elsewhere; one gone was deleted while this process held it (another process's `XAUTOCLAIM` may have
 * dropped its id already), though it may also have been acked elsewhere then trimmed (pending-entry.ts).
 * @module
 */
import { loadScript } from '../redis/script-runner.js';
import type { StreamsContext } from './consumer-context.js';
import { isEntryGone } from './pending-entry.js';
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
  // (isScriptRefused), then XCLAIM and an XRANGE for each id it did not claim.
  let scriptedIdle = true;
  // Re-own `ids` and set their idle time: a claim round takes them once idle reaches `minIdle`. JUSTID keeps
  // the delivery counts as they are. Resolves to the ids found deleted while still pending: this process's
  // to report. The script leaves them pending (`pending`), for their letter to ack (deleted-letters.ts);
  // Redis 7's XCLAIM, without the script, has dropped them. With the script, an id no longer pending was
  // settled by another consumer (reclaimed, run, acked), deleted since or not: nothing to report (the
  // reclaim script leaves a held id to its holder). Without it, only while its entry is still there.
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
    // XCLAIM claims only pending ids, and (Redis 7) drops a deleted one from the pending list. An id it did
    // not claim whose entry is still there was settled by another consumer (acked, perhaps reclaimed and
    // run): nothing to do, as the script decides. Gone, it was deleted while this process held it, and
    // this XCLAIM, or another process's XAUTOCLAIM (no reclaim script, whatever the id's idle time), has
    // dropped its id: another process recorded it without the fields it never read, so it is this
    // process's to record, with them (pending-entry.ts). One acked elsewhere and trimmed since is taken so
    // too: a redundant letter rather than a payload lost (see the docs). An XPENDING first, as the script
    // asks, would tell nothing more: an id not pending gets the same XRANGE.
    const reply = await command(client, [
      'XCLAIM',
      stream,
      group,
      consumer,
      '0',
      ...ids,
      'IDLE',
      String(idleMs),
      'JUSTID',
    ]);
    // A reply of another form: nothing more to look at.
    if (!Array.isArray(reply)) return { deleted: [], pending: false };
    const claimed = new Set(reply.map(String));
    const deleted: string[] = [];
    for (const id of ids) {
      if (claimed.has(id)) continue;
      if (await isEntryGone(client, stream, id)) deleted.push(id);
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
