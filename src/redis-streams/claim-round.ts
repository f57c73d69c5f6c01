/**
 * The consumer's claim rounds: pending entries idle for `minIdle` (a crashed consumer's, or a retry's once
 * its delay is over) reclaimed by this consumer, with their delivery counts, and the ids found deleted while
 * pending. Through scripts/reclaim-1.lua, which leaves a deleted id pending for its letter to ack, and an
 * entry this process is handling to its delivery, however idle; where
 * Redis refuses the script, `XAUTOCLAIM` and an `XPENDING` per entry, as before it.
 * @module
 */
import { loadScript } from '../redis/script-runner.js';
import type { StreamsContext } from './consumer-context.js';
import { ABANDONED, type LoopCommand } from './loop-command.js';
import {
  command,
  parseAutoClaim,
  parsePendingCounts,
  readCommand,
  type StreamEntry,
} from './redis-client.js';
import { isScriptRefused } from './redis-errors.js';
import { reclaim as reclaimScript } from './scripts.gen.js';

// Its SHA1, computed once: each call is an EVALSHA (script-call.ts).
const RECLAIM_SCRIPT = loadScript(reclaimScript);

/**
 * Most entries one claim round of the reclaim script looks at: it passes their ids to `XCLAIM` through
 * Lua's `unpack`, which fails past ~8,000 values (a `concurrency` that large would fail every round).
 */
const MAX_SCRIPT_CLAIMS = 1_000;

/**
 * Most pending ids one round of the reclaim script looks at: ten per entry it may claim, as `XAUTOCLAIM`
 * does, at least 100 and at most 1,000. Unbounded (`XPENDING … IDLE`), a round walked the whole pending
 * list whenever few of its ids were idle enough: about 4 ms of Redis time for 50,000 ids, every round.
 */
const lookAt = (claims: number) => Math.min(Math.max(claims * 10, 100), 1_000);

/**
 * One claim round's entries, with their delivery counts, and the ids found deleted while pending:
 * still pending when the script found them (`pending`), perhaps dropped by `XAUTOCLAIM` otherwise.
 */
export interface ClaimedRound {
  /** Where the next round starts (`0-0`: the pending list was all looked at). */
  cursor: string;
  entries: StreamEntry[];
  deleted: string[];
  counts: number[];
  pending: boolean;
}

/** The claim rounds of one consumer, and where the next one starts. */
export class ClaimRounds {
  /** Where the next round starts: `0-0` at first, after a full pass, and for a group re-created. */
  cursor = '0-0';
  // Whether claim rounds go through the reclaim script (scripts/reclaim-1.lua): until Redis refuses to run
  // it (an ACL user denied EVAL, a proxy without it), then XAUTOCLAIM and an XPENDING per entry, as before.
  private scripted = true;

  /**
   * @param context - The consumer's shared parts.
   * @param loopCommand - Sends each command as one of the loop's, bounded (loop-command.ts).
   */
  constructor(
    private readonly context: StreamsContext,
    private readonly loopCommand: LoopCommand,
  ) {}

  /**
   * One round from {@link ClaimRounds.cursor}, claiming `count` entries at most, none of `held` (the
   * entries this process is handling: their idle resets may reach Redis late, after an event loop stalled
   * past `minIdle`, and a claim counted a delivery of an entry whose first delivery was still alive).
   * `XAUTOCLAIM`, where the script is refused, cannot leave them out: it may return them, and has then
   * counted a delivery of them.
   */
  async next(
    count: number,
    held: readonly string[] = [],
  ): Promise<ClaimedRound | typeof ABANDONED> {
    const { client, runScript } = this.context;
    const { stream, group, consumer, minIdleMs } = this.context.options;
    const loopCommand = this.loopCommand;
    if (this.scripted) {
      try {
        const reply = await loopCommand(
          runScript(
            RECLAIM_SCRIPT,
            [stream],
            [
              group,
              consumer,
              String(minIdleMs),
              this.cursor,
              String(Math.min(count, MAX_SCRIPT_CLAIMS)),
              String(lookAt(Math.min(count, MAX_SCRIPT_CLAIMS))),
              ...held,
            ],
            true,
          ),
          'XAUTOCLAIM',
        );
        if (reply === ABANDONED) return ABANDONED;
        const claimed = parseAutoClaim(stream, reply);
        const counts = Array.isArray(reply) && Array.isArray(reply[3]) ? reply[3].map(Number) : [];
        return { ...claimed, counts, pending: true };
      } catch (error) {
        if (!isScriptRefused(error)) throw error;
        this.scripted = false;
        // The script's cursor is exclusive (`(id`), a form XAUTOCLAIM does not take: start over.
        this.cursor = '0-0';
      }
    }
    const reply = await loopCommand(
      readCommand(client, [
        'XAUTOCLAIM',
        stream,
        group,
        consumer,
        String(minIdleMs),
        this.cursor,
        'COUNT',
        String(count),
      ]),
      'XAUTOCLAIM',
    );
    if (reply === ABANDONED) return ABANDONED;
    const claimed = parseAutoClaim(stream, reply);
    const counts = await loopCommand(
      Promise.all(
        claimed.entries.map(async (entry) =>
          parsePendingCounts(
            await command(client, ['XPENDING', stream, group, entry.id, entry.id, '1']),
          ),
        ),
      ),
      'XPENDING',
    );
    // The claimed entries stay pending, to be reclaimed after minIdle.
    if (counts === ABANDONED) return ABANDONED;
    return {
      ...claimed,
      counts: claimed.entries.map((entry, index) => counts[index]?.get(entry.id) ?? 2),
      pending: false,
    };
  }
}
