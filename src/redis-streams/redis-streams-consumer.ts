/**
 * The idempotent Redis Streams consumer (consumer groups): thin over the shared consumer module. Its read
 * loop reads entries (`XREADGROUP`) and reclaims idle ones (claim-round.ts), starts each in a free slot,
 * and hands back what it read once `close()` began. Redelivery later leaves the entry pending and lets a
 * claim round reclaim it once idle; the entry's idle time is set (idle-times.ts) so that this happens after
 * the decided delay, and is reset from the delivery's start (consumer/claim-phase.ts) until its decision is
 * carried out. Dead letters:
 * dead-letters.ts; entries deleted while pending: deleted-letters.ts.
 * @module
 */

import { touchWhileClaiming } from '../consumer/claim-phase.js';
import {
  type ConsumerHandler,
  InFlight,
  processDelivery,
  recordHandedBack,
  settlesWithin,
  sleep,
} from '../consumer/index.js';
import { MAX_TIMER_MS } from '../core/duration.js';
import { AckBatcher } from './acks.js';
import { ClaimRounds } from './claim-round.js';
import type { StreamsContext } from './consumer-context.js';
import { consumerErrorReport } from './consumer-errors.js';
import { type RedisStreamsConsumerOptions, resolveStreamsOptions } from './consumer-options.js';
import { deadLetterWriter } from './dead-letters.js';
import { deletedLetters } from './deleted-letters.js';
import { lastDeliveredId } from './group-position.js';
import { HeldEntries } from './held-entries.js';
import { idleTimes } from './idle-times.js';
import { atomicLetter } from './letter-script.js';
import { LiveEntries } from './live-entries.js';
import { ABANDONED, awaitLoopCommand, type LoopCommand } from './loop-command.js';
import {
  command,
  parseReadGroup,
  type RedisStreamsClient,
  readCommand,
  type StreamEntry,
} from './redis-client.js';
import { isGroupGone } from './redis-errors.js';
import { scriptCaller } from './script-call.js';

/** A running consumer. */
export interface RedisStreamsConsumer {
  /** This consumer's name within the group. */
  readonly consumer: string;
  /**
   * Stop reading, then wait for the current read to return and for in-flight entries to settle, up to
   * `drainTimeout` in all; resolves to whether both happened in time. Nothing is started once it began:
   * entries the read (or claim round) in progress brings are handed back, pending with their idle time set
   * to `minIdle`, for another consumer's next claim round. A dead letter (or retry) its delivery gave up on
   * past `brokerTimeout` is waited for too: after `close()` resolved, no letter lands unless it resolved
   * `false`, and no hook fires either way. A read still unanswered then (a Redis
   * that hangs without closing the connection) is abandoned: entries a late reply brings stay pending, for
   * `XAUTOCLAIM` to hand to a live consumer after `minIdle`. A loop command already past its bound
   * (`brokerTimeout`, plus its wait, at most `block`, for a blocking read) is abandoned at once: `close()`
   * then resolves `false` as soon as in-flight entries settled. Its resolving is the end of every hook
   * call, whatever it resolved: a report still owed then (a handler past `drainTimeout` and its ack, a
   * dead letter landing late, a command left unanswered past `brokerTimeout`, a deleted entry whose
   * letter is still being written, or fails) is dropped; the work goes on, and an entry whose letter
   * does not land stays pending, for a live consumer's claim round to report and record (only where the
   * scripts are refused may Redis 7 have dropped its id).
   */
  close(): Promise<boolean>;
  /** Resolves when the read loop ends. */
  readonly done: Promise<void>;
}

/**
 * Consume a Redis Stream through a consumer group so that each entry's effect happens once per key.
 *
 * - executed or duplicate → `XACK` (after the completion is durable in the store);
 * - in progress elsewhere, store unavailable, or a handler error with deliveries left → the entry stays
 *   pending; its idle time is set to `minIdle − delay` so `XAUTOCLAIM` reclaims it after the delay;
 * - a handler error on the last allowed delivery (the `XPENDING` delivery count) → `XADD` to the dead-letter
 *   stream with the error recorded and `XACK`, as one script (scripts/dead-letter-2.lua).
 *
 * Delays are capped at `minIdle`. A handler running longer than `minIdle` keeps its entry from being
 * reclaimed by resetting its idle time every `minIdle / 3`, and so do a slow store claim before it and a
 * slow ack or dead letter until it is done. An entry deleted from the stream while pending (`XTRIM`,
 * `MAXLEN`) is reported (`onConsumerError`, operation `deleted`) and recorded in the dead-letter stream
 * (deleted-entries.ts), its id acked in the same script as its letter is written.
 * @example
 * const consumer = await idempotentConsumer(client, async (entry) => ship(entry.fields), {
 *   stream: 'orders', group: 'shipping', name: 'shipping', idempotency: { store },
 *   blockingClient: client.duplicate(),
 * });
 */
export async function idempotentConsumer(
  client: RedisStreamsClient,
  handler: ConsumerHandler<StreamEntry>,
  options: RedisStreamsConsumerOptions,
): Promise<RedisStreamsConsumer> {
  const settings = resolveStreamsOptions(client, options);
  const { resolved, blockingClient, stream, group, consumer, blockMs, pollMs, minIdleMs, claimMs } =
    settings;
  // Through the resolved hooks, which close() ends as it resolves (consumer/hook-calls.ts).
  const reportError = consumerErrorReport(resolved);

  // Create the group at `start` unless it exists; MKSTREAM, so a consumer may start before any producer.
  const createGroup = async (start: string) => {
    try {
      await command(client, ['XGROUP', 'CREATE', stream, group, start, 'MKSTREAM']);
    } catch (error) {
      if (!String((error as Error)?.message).includes('BUSYGROUP')) throw error;
    }
  };
  await createGroup('0');
  // The highest entry id this consumer read with `>`: where a group found missing is re-created. Until it
  // reads one, where the group stood at startup (group-position.ts): every entry up to there was delivered
  // already, and re-created at `0` the group delivered the whole stream again.
  let lastRead: string | undefined = await lastDeliveredId(client, stream, group);

  // The acks of one burst share one XACK (see acks.ts); each caller still waits for that command's reply.
  const acks = new AckBatcher(
    (ids) => command(client, ['XACK', stream, group, ...ids]),
    resolved.brokerTimeoutMs,
  );
  const context: StreamsContext = {
    client,
    options: settings,
    // Scripts go as EVALSHA, falling back to EVAL on NOSCRIPT (script-call.ts).
    runScript: scriptCaller(client),
    reportError,
    ack: (id) => acks.ack(id),
  };
  const { ack } = context;
  const { setIdle, setHeldIdle } = idleTimes(context);
  const letterScript = atomicLetter(context);
  // Entries deleted while pending: recorded, acked and reported in one of three shapes (deleted-letters.ts).
  const deletedPath = deletedLetters(context, letterScript);
  const { reportDeleted } = deletedPath;
  const deadLetter = deadLetterWriter(context, letterScript, deletedPath);

  const inFlight = new InFlight(resolved.concurrency);
  const stop = new AbortController();
  // The entries this process is handling, by id, with what their deliveries know of them (see `reclaim`):
  // held while any delivery of one runs; this process's claim rounds leave them to it while one still
  // resets their idle time, those of every consumer instance of the process on this stream and group
  // (live-entries.ts: the event loop, stalled, delays every instance's resets alike).
  const handling = new HeldEntries(new LiveEntries(stream, group));
  // How often a delivery's idle time is reset. At most a timer's limit (a minIdle of months): past it the
  // entry would be touched in a loop.
  const touchIntervalMs = Math.min(Math.max(Math.floor(minIdleMs / 3), 10), MAX_TIMER_MS);
  // Resolves to false, starting nothing, when close() began while it waited for a slot.
  const start = async (entry: StreamEntry, deliveryCount: number): Promise<boolean> => {
    await inFlight.acquire();
    if (stop.signal.aborted) {
      inFlight.release();
      return false;
    }
    const held = handling.hold(entry.id);
    // Set once this delivery stopped resetting the entry's idle time for good (`touchesEnded`).
    let expired = false;
    const touch = () => setHeldIdle(entry.id, held, 0);
    // Until the handler starts (then the handler's own resets, from the last one): the store's claim
    // before it must not let this process's own claim round take the entry and count a delivery
    // (consumer/claim-phase.ts).
    const claiming = touchWhileClaiming(resolved, entry, deliveryCount, touch, touchIntervalMs);
    const stopClaimTouches = () => claiming.stop();
    inFlight.run(() =>
      processDelivery(
        resolved,
        (message, context) => {
          stopClaimTouches();
          return handler(message, context);
        },
        {
          message: entry,
          deliveryCount,
          // A delivery handed back by close() is recorded (handBack below), and not counted against
          // maxDeliveries when a handler error would dead-letter the entry.
          mayHandBack: true,
          // Entry ids are never reused in a stream, and time-based across a stream deleted and re-created.
          brokerId: `${stream}:${entry.id}`,
          ack: () => ack(entry.id),
          retry: async (delayMs) => {
            // Before the idle time its delay needs is set: a touch after it would undo the delay.
            stopClaimTouches();
            await setHeldIdle(entry.id, held, Math.max(minIdleMs - Math.ceil(delayMs), 0));
            // Gone from the stream: no redelivery will come. Recorded with its fields instead of waited
            // for in vain (and acked with its letter, where the script left it pending).
            if (held.deleted) await reportDeleted(entry.id, !held.dropped, entry);
          },
          deadLetter: (letter) => deadLetter(entry, deliveryCount, letter, held),
          // The idle resets go on until the ack or dead letter is done (a slow one let a claim round hand
          // the entry to another consumer meanwhile, whose delivery ran the handler again). Never after a
          // retry (a dead letter whose write failed turns into one): it set the idle time the redelivery
          // waits for, and the shared runner stops the resets before it calls `retry` (consumer/settle.ts).
          // One after the entry was settled finds it no longer pending, and does nothing.
          touchUntilSettled: true,
          touch,
          touchIntervalMs,
          touchedAt: () => claiming.touchedAt,
          // The lease lost (a hung handler past maxExecution): its idle time is no longer reset, and this
          // process's claim rounds redeliver the entry, no longer left to this delivery.
          touchesEnded: () => {
            if (expired) return;
            expired = true;
            handling.expire(entry.id);
          },
        },
      ).finally(() => {
        stopClaimTouches();
        handling.release(entry.id, expired);
      }),
    );
    return true;
  };
  const closed = new Promise<void>((resolve) =>
    stop.signal.addEventListener('abort', () => resolve(), { once: true }),
  );
  // Set when close() stopped waiting for the read loop (a command a hung Redis never answers): entries a late
  // reply brings are then left pending for XAUTOCLAIM, never started behind a close() that has returned.
  let abandoned = false;
  // Each of the loop's commands is waited for at most `ms`, then reported and still waited for
  // (loop-command.ts); close() abandons one past its bound at once, ending the loop without its answer.
  const loopCommand: LoopCommand = async (sent, what, ms = resolved.brokerTimeoutMs) => {
    const answer = await awaitLoopCommand(sent, {
      ms,
      what,
      report: (error) => reportError('read', error),
      closed,
    });
    if (answer === ABANDONED) abandoned = true;
    return answer;
  };
  const rounds = new ClaimRounds(context, loopCommand);
  let nextClaimAt = 0;

  // Start `entries` (each with its delivery count) in turn; once close() has begun, start no more and hand
  // the rest back.
  async function startAll(entries: StreamEntry[], counts: number[]): Promise<void> {
    for (const [index, entry] of entries.entries()) {
      if (abandoned) return;
      if (stop.signal.aborted || !(await start(entry, counts[index] ?? 1))) {
        await handBack(entries.slice(index), counts.slice(index));
        return;
      }
    }
  }

  // Entries read or reclaimed after close() began: never started, they stay pending, with their idle time
  // set to `minIdle` so that XAUTOCLAIM hands them to a live consumer at its next round rather than after
  // `minIdle`. Each delivery is recorded first (consumer/handed-back.ts): the one XAUTOCLAIM then counts
  // does not count against maxDeliveries. A hand-back that fails, or is abandoned, leaves them pending all
  // the same, reclaimed after `minIdle`. One deleted since it was read is reported and recorded, with its
  // fields (the set-idle script tells it apart from one settled elsewhere).
  async function handBack(entries: StreamEntry[], counts: number[]): Promise<void> {
    if (entries.length === 0) return;
    await Promise.all(
      entries.map((entry, index) =>
        recordHandedBack(resolved, `${stream}:${entry.id}`, counts[index] ?? 1),
      ),
    );
    const found = await loopCommand(
      setIdle(
        entries.map((entry) => entry.id),
        minIdleMs,
      ),
      'XCLAIM',
    );
    if (found === ABANDONED || found.deleted.length === 0) return;
    // Deleted while pending since it was read: reported and recorded with its fields, which only this
    // process holds now, as a retry meeting the deletion does. A record that fails was reported too.
    const byId = new Map(entries.map((entry) => [entry.id, entry]));
    await loopCommand(
      Promise.allSettled(found.deleted.map((id) => reportDeleted(id, found.pending, byId.get(id)))),
      'XADD',
    );
  }

  async function reclaim(count: number): Promise<void> {
    // Not the entries this process handles, however idle: their idle resets reach Redis late after an
    // event loop stalled past `minIdle` (synchronous work in a handler), and a round sent first took one,
    // counting a delivery, and started a second delivery beside the live first one. That delivery met the
    // key in progress and retried: a healthy entry's count climbed, and a failing one was dead-lettered
    // before `maxDeliveries` real failures.
    // A delivery that stopped resetting for good (a hung handler past maxExecution) is taken again, as a
    // crashed consumer's entry.
    const claimed = await rounds.next(count, handling.liveIds());
    if (claimed === ABANDONED) return;
    rounds.cursor = claimed.cursor;
    // Deleted while pending, and idle past minIdle (abandoned by a consumer that crashed, or one whose
    // entry waits for its retry): nothing left to deliver. Reported and recorded (deleted-letters.ts), the
    // letter and the ack in one script: the script left the id pending, so one whose record fails (or
    // whose process dies first) stays so, to be recorded at a later round. Without it, XADD then XACK
    // (Redis 6.2 keeps such an id pending; Redis 7's XAUTOCLAIM has dropped it already).
    // One this process handles is left to its holder, told so here: it settles it, with its fields, and
    // no longer resets its idle time (XAUTOCLAIM, where the script is refused, drops a deleted id whatever
    // its idle time). XAUTOCLAIM also drops the ids of entries a live consumer of another process handles:
    // they cannot be told apart here, and are recorded without fields; their holder, finding the id no
    // longer pending and the entry gone, records them again with theirs (idle-times.ts, see the docs).
    // One another consumer instance of this process handles live is left to it too (its resets find the
    // deletion, and record it with its fields): recorded here, a healthy entry got a second letter,
    // without fields, and was acked under its holder.
    const deleted: string[] = [];
    for (const id of claimed.deleted) {
      const held = handling.get(id);
      if (held === undefined) {
        if (!handling.isLive(id)) deleted.push(id);
      } else if (!held.deleted) {
        held.deleted = true;
        held.dropped = !claimed.pending;
      }
    }
    if (deleted.length > 0) {
      await loopCommand(
        Promise.allSettled(deleted.map((id) => reportDeleted(id, claimed.pending))),
        'XADD',
      );
    }
    // `XAUTOCLAIM` (the script refused) cannot leave a held entry out: it took it, counting a delivery,
    // but no second delivery starts; the first one's resets go on, its settle acks or retries it. The
    // delivery it counted never runs: recorded as handed back (consumer/handed-back.ts), so that it does
    // not count against maxDeliveries, which a failing handler's next delivery otherwise reached early.
    const entries: StreamEntry[] = [];
    const counts: number[] = [];
    const skipped: Array<Promise<void>> = [];
    for (const [index, entry] of claimed.entries.entries()) {
      const count = claimed.counts[index] ?? 2;
      if (!handling.isLive(entry.id)) {
        entries.push(entry);
        counts.push(count);
      } else skipped.push(recordHandedBack(resolved, `${stream}:${entry.id}`, count));
    }
    await Promise.all(skipped);
    await startAll(entries, counts);
    if (rounds.cursor === '0-0') nextClaimAt = Date.now() + claimMs;
  }

  async function loop(): Promise<void> {
    while (!stop.signal.aborted) {
      await inFlight.acquire();
      inFlight.release();
      // Closed while waiting for a slot: claim nothing more for this consumer.
      if (stop.signal.aborted) break;
      try {
        if (Date.now() >= nextClaimAt) await reclaim(Math.max(inFlight.free, 1));
        if (stop.signal.aborted) break;
        // Read only what can start now: reclaimed entries may have taken every slot. An entry read without
        // a slot would wait in this process with its idle time never reset (XAUTOCLAIM then hands it to
        // another consumer while this one still holds it), and start whenever a slot frees, even after
        // close() gave up on the drain and resolved.
        const count = inFlight.free;
        if (count === 0) continue;
        // No wait past the next claim round: the loop sends one command at a time, so a read blocked for
        // `block` (or a pause of `pollInterval`) on an idle stream held XAUTOCLAIM back as long, and every
        // retry's delay and a crashed consumer's entries with it.
        const untilClaim = Math.max(nextClaimAt - Date.now(), 1);
        const waitMs = Math.min(blockMs, untilClaim);
        const reader = blockingClient ?? client;
        const reply = await loopCommand(
          readCommand(reader, [
            'XREADGROUP',
            'GROUP',
            group,
            consumer,
            'COUNT',
            String(count),
            ...(blockingClient === undefined ? [] : ['BLOCK', String(waitMs)]),
            'STREAMS',
            stream,
            '>',
          ]),
          'XREADGROUP',
          // A blocking read legitimately takes up to `block` when nothing comes. At most a timer's limit.
          Math.min(
            resolved.brokerTimeoutMs + (blockingClient === undefined ? 0 : waitMs),
            MAX_TIMER_MS,
          ),
        );
        if (reply === ABANDONED) break;
        const read = parseReadGroup(stream, reply);
        if (abandoned) break;
        const newest = read.entries.at(-1)?.id;
        if (newest !== undefined) lastRead = newest;
        // Entries a read in progress brings after close() began are handed back, never started.
        await startAll(
          read.entries,
          read.entries.map(() => 1),
        );
        if (read.entries.length === 0 && blockingClient === undefined)
          await sleep(Math.min(pollMs, untilClaim), stop.signal);
      } catch (error) {
        if (stop.signal.aborted) break;
        reportError('read', error);
        if (isGroupGone(error)) {
          // The group (or the whole stream) was deleted. Re-created after the last entry read here: what
          // came later is delivered, what this consumer already read is not again (entries other
          // consumers had read are, and settle as duplicates). The old group's pending entries are gone.
          try {
            await createGroup(lastRead ?? '0');
            rounds.cursor = '0-0';
            continue;
          } catch (createError) {
            reportError('create-group', createError);
          }
        }
        // A lost connection: wait and try again; pending entries are reclaimed once idle.
        await sleep(Math.min(claimMs, 1000), stop.signal);
      }
    }
  }

  const done = loop();
  let closing: Promise<boolean> | undefined;
  return {
    consumer,
    done,
    close: () => {
      closing ??= (async () => {
        stop.abort();
        const deadline = performance.now() + resolved.drainTimeoutMs;
        // The loop ends once its current command returns (a blocking read within `block`), but a Redis that
        // hangs without closing the connection never answers it, and node-redis does not time out a command
        // already written: the wait for the loop counts against the drain timeout too.
        const loopEnded = await settlesWithin(done, resolved.drainTimeoutMs);
        if (!loopEnded) abandoned = true;
        const drained = await inFlight.drain(Math.max(deadline - performance.now(), 0));
        // Then the settle calls their deliveries gave up on after brokerTimeout, within what is left: a
        // dead letter (or a retry) frees its slot but goes on, and a letter landing late fires
        // onDeadLetter then. After close() resolved true, no letter is written (and after it resolved at
        // all, no hook fires: consumer/hook-calls.ts). Tracked by consumer/settle.ts (late-settles.ts).
        const settled = await resolved.lateSettles.settledBy(deadline);
        // The end of every hook call, whatever it resolves: what is still running goes on unreported.
        resolved.endHooks();
        // `abandoned` also when the loop ended by abandoning a command known hung (loop-command.ts).
        return !abandoned && drained && settled;
      })();
      return closing;
    },
  };
}
