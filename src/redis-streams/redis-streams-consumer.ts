/**
 * The idempotent Redis Streams consumer (consumer groups): thin over the shared consumer module.
 * Redelivery later leaves the entry pending and lets a claim round (`scripts/reclaim-1.lua`, or
 * `XAUTOCLAIM`) reclaim it once idle; the entry's idle time is set so that this happens after the decided
 * delay, and is reset while a handler runs.
 * @module
 */
import { hostname } from 'node:os';
import {
  type ConsumerHandler,
  type ConsumerHooks,
  type ConsumerOptions,
  type DeadLetter,
  InFlight,
  NOT_WRITTEN,
  processDelivery,
  recordHandedBack,
  settlesWithin,
  sleep,
} from '../consumer/index.js';
import { resolveConsumerOptions } from '../consumer/options.js';
import { type Duration, MAX_TIMER_MS, toMs } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import { callHook } from '../core/hooks.js';
import { callbacksOption, durationOption, stringOption } from '../core/option-checks.js';
import { loadScript } from '../redis/script-runner.js';
import { AckBatcher } from './acks.js';
import {
  deletedLetterFields,
  EntryDeletedError,
  letterFields,
  storedFields,
} from './deleted-entries.js';
import { letterWritten } from './letter-written.js';
import { ABANDONED, awaitLoopCommand } from './loop-command.js';
import {
  type CommandArgument,
  command,
  isStreamsClient,
  parseAutoClaim,
  parsePendingCounts,
  parseReadGroup,
  type RedisStreamsClient,
  readCommand,
  type StreamEntry,
} from './redis-client.js';
import { scriptCaller } from './script-call.js';
import {
  deadLetter as deadLetterScript,
  reclaim as reclaimScript,
  setIdle as setIdleScript,
} from './scripts.gen.js';

// Their SHA1, computed once: each call is an EVALSHA (script-call.ts).
const DEAD_LETTER_SCRIPT = loadScript(deadLetterScript);
const RECLAIM_SCRIPT = loadScript(reclaimScript);
const SET_IDLE_SCRIPT = loadScript(setIdleScript);

/** The default key field. */
export const KEY_FIELD = 'x-idempotency-key';

/**
 * Shortest `minIdle` accepted. Entries being handled have their idle time reset every `minIdle / 3`; much
 * below this, `XAUTOCLAIM` takes entries from live consumers between two resets (each time counting a
 * delivery), and every redelivery delay, capped at `minIdle`, becomes a busy loop.
 */
export const MIN_IDLE_FLOOR_MS = 100;

/**
 * Most letter fields (names and values) sent through the dead-letter script: Lua's `unpack` of its
 * arguments fails past ~8,000 values, so a letter of an entry with more fields goes as two commands.
 */
const MAX_SCRIPT_FIELDS = 7_000;

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

/** A failure of the consumer as a whole rather than of one message. */
export interface RedisStreamsConsumerErrorEvent {
  /** The consumer's name. */
  consumer: string;
  /**
   * What failed: `read` (an `XREADGROUP` or `XAUTOCLAIM`; the loop waits and tries again; or one of the
   * loop's commands unanswered past `brokerTimeout`, its wait (at most `block`) more for a blocking read: a
   * `BrokerTimeoutError`, and the loop waits for its answer), `create-group` (re-creating a group found
   * missing), or `deleted`: an entry was deleted from the stream (`XDEL`, `XTRIM`, `XADD … MAXLEN`) while
   * pending, so the message is lost to the group (an `EntryDeletedError`, and `entryId` set; also the
   * failure to record it in the dead-letter stream, with the same `entryId`).
   */
  operation: 'read' | 'create-group' | 'deleted';
  /** The error (a lost connection, `NOGROUP`, an `EntryDeletedError`, …). */
  error: unknown;
  /** With operation `deleted`: the id of the entry deleted while pending. */
  entryId?: string;
}

/** The shared consumer hooks, plus the one for failures of the consumer as a whole. */
export interface RedisStreamsConsumerHooks extends ConsumerHooks<StreamEntry> {
  /**
   * A read failed (the loop goes on after a pause), or the group was missing (`NOGROUP`: the group or the
   * stream was deleted) and is re-created. Never called for one message's own operations: those go to
   * `onBrokerError`.
   */
  onConsumerError?(event: RedisStreamsConsumerErrorEvent): void;
}

/** Options of {@link idempotentConsumer} for Redis Streams. */
export interface RedisStreamsConsumerOptions extends ConsumerOptions<StreamEntry> {
  /** Observation callbacks. */
  hooks?: RedisStreamsConsumerHooks;
  /** The stream key. */
  stream: string;
  /**
   * The consumer group: created at `'0'` with `MKSTREAM` if missing at start. If it goes missing while the
   * consumer runs, it is re-created after the last entry this consumer read (see the docs).
   */
  group: string;
  /** This process's consumer name within the group. @default `${name}-${hostname}-${pid}` */
  consumer?: string;
  /**
   * A second connection for the blocking `XREADGROUP … BLOCK`, so acks never wait behind it. Without
   * one, the consumer polls `client` every `pollInterval`.
   */
  blockingClient?: RedisStreamsClient;
  /** Longest wait of one blocking read; never past the next claim round (`claimInterval`). @default '1s' */
  block?: Duration;
  /**
   * Wait between empty reads when there is no `blockingClient`, never past the next claim round
   * (`claimInterval`): at most 2³¹−1 ms (about 24.8 days), a timer's limit. @default '50ms'
   */
  pollInterval?: Duration;
  /**
   * A pending entry idle this long is reclaimed (`XAUTOCLAIM`) by any consumer of the group: how a crashed
   * consumer's messages come back, and the longest redelivery delay. At least 100 ms
   * ({@link MIN_IDLE_FLOOR_MS}). @default '30s'
   */
  minIdle?: Duration;
  /** How often this consumer looks for reclaimable entries. @default '1s' */
  claimInterval?: Duration;
  /** Where dead letters are added (fields + error fields); not `stream` itself. @default `${stream}:dlq` */
  deadLetterStream?: string;
}

// The options RedisStreamsConsumerOptions adds to the shared ones, checked by the compiler both ways.
const STREAMS_OPTION_FIELDS = {
  stream: true,
  group: true,
  consumer: true,
  blockingClient: true,
  block: true,
  pollInterval: true,
  minIdle: true,
  claimInterval: true,
  deadLetterStream: true,
} as const satisfies Record<
  Exclude<keyof RedisStreamsConsumerOptions, keyof ConsumerOptions<StreamEntry>>,
  true
>;
const STREAMS_OPTION_NAMES = {
  who: 'idempotentConsumer (Redis Streams)',
  own: Object.keys(STREAMS_OPTION_FIELDS),
};

/** A running consumer. */
export interface RedisStreamsConsumer {
  /** This consumer's name within the group. */
  readonly consumer: string;
  /**
   * Stop reading, then wait for the current read to return and for in-flight entries to settle, up to
   * `drainTimeout` in all; resolves to whether both happened in time. Nothing is started once it began:
   * entries the read (or claim round) in progress brings are handed back, pending with their idle time set
   * to `minIdle`, for another consumer's next claim round. A dead letter (or retry) its delivery gave up on
   * past `brokerTimeout` is waited for too: after `close()` resolved, no letter lands and no hook fires
   * unless it resolved `false`. A read still unanswered then (a Redis
   * that hangs without closing the connection) is abandoned: entries a late reply brings stay pending, for
   * `XAUTOCLAIM` to hand to a live consumer after `minIdle`. A loop command already past its bound
   * (`brokerTimeout`, plus its wait, at most `block`, for a blocking read) is abandoned at once: `close()`
   * then resolves `false` as soon as in-flight entries settled.
   */
  close(): Promise<boolean>;
  /** Resolves when the read loop ends. */
  readonly done: Promise<void>;
}

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
 * reclaimed by resetting its idle time every `minIdle / 3`. An entry deleted from the stream while pending
 * (`XTRIM`, `MAXLEN`) is reported (`onConsumerError`, operation `deleted`) and recorded in the dead-letter
 * stream (deleted-entries.ts), its id acked in the same script as its letter is written.
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
  const resolved = resolveConsumerOptions(options, defaultStreamKey, STREAMS_OPTION_NAMES);
  if (!isStreamsClient(client)) {
    throw new InvalidOptionsError('client: pass a connected node-redis or ioredis client');
  }
  // null is "not given", as everywhere: the consumer then polls `client`.
  const blockingClient = options.blockingClient ?? undefined;
  if (blockingClient !== undefined && !isStreamsClient(blockingClient)) {
    throw new InvalidOptionsError('blockingClient: pass a connected node-redis or ioredis client');
  }
  const stream = stringOption(options.stream, 'stream', '');
  const group = stringOption(options.group, 'group', '');
  if (!stream || !group) throw new InvalidOptionsError('stream and group are required');
  const consumer = stringOption(
    options.consumer,
    'consumer',
    `${options.name}-${hostname()}-${process.pid}`,
  );
  callbacksOption<RedisStreamsConsumerHooks>(options.hooks, 'hooks');
  const blockMs = toMs(options.block ?? '1s', 'block');
  // A timer: past MAX_TIMER_MS Node fires it at once, and the stream would be read in a loop.
  const pollMs = durationOption(options.pollInterval, 'pollInterval', 50, { maxMs: MAX_TIMER_MS });
  const minIdleMs = toMs(options.minIdle ?? '30s', 'minIdle');
  if (minIdleMs < MIN_IDLE_FLOOR_MS) {
    throw new InvalidOptionsError(
      `minIdle: must be at least ${MIN_IDLE_FLOOR_MS}ms, got ${minIdleMs}ms (entries being handled are reset every minIdle / 3)`,
    );
  }
  const claimMs = toMs(options.claimInterval ?? '1s', 'claimInterval');
  const deadLetterStream = stringOption(
    options.deadLetterStream,
    'deadLetterStream',
    `${stream}:dlq`,
  );
  if (deadLetterStream === '') {
    throw new InvalidOptionsError('deadLetterStream: must be a stream name, got ""');
  }
  if (deadLetterStream === stream) {
    // Each dead letter would be read again as a new entry, fail again, and be dead-lettered again.
    throw new InvalidOptionsError('deadLetterStream: must not be the consumed stream itself');
  }
  const reportError = (
    operation: RedisStreamsConsumerErrorEvent['operation'],
    error: unknown,
    entryId?: string,
  ) => {
    const event: RedisStreamsConsumerErrorEvent = { consumer: resolved.name, operation, error };
    if (entryId !== undefined) event.entryId = entryId;
    // A hook that throws or rejects is ignored.
    callHook(
      (event: RedisStreamsConsumerErrorEvent) => options.hooks?.onConsumerError?.(event),
      event,
    );
  };

  // Create the group at `start` unless it exists; MKSTREAM, so a consumer may start before any producer.
  const createGroup = async (start: string) => {
    try {
      await command(client, ['XGROUP', 'CREATE', stream, group, start, 'MKSTREAM']);
    } catch (error) {
      if (!String((error as Error)?.message).includes('BUSYGROUP')) throw error;
    }
  };
  await createGroup('0');
  // The highest entry id this consumer read with `>`: where a group found missing is re-created.
  let lastRead: string | undefined;

  // The acks of one burst share one XACK (see acks.ts); each caller still waits for that command's reply.
  const acks = new AckBatcher(
    (ids) => command(client, ['XACK', stream, group, ...ids]),
    resolved.brokerTimeoutMs,
  );
  const ack = (id: string) => acks.ack(id);
  // Scripts go as EVALSHA, falling back to EVAL on NOSCRIPT (script-call.ts).
  const runScript = scriptCaller(client);
  // Whether idle times are set through scripts/set-idle-1.lua: until Redis refuses to run it
  // (isScriptRefused), then XCLAIM and, when it claims nothing, an XRANGE, as before the script.
  let scriptedIdle = true;
  // Re-own `ids` and set their idle time: a claim round takes them once idle reaches `minIdle`. JUSTID keeps
  // the delivery counts as they are. Resolves to the ids found deleted while still pending: this process's
  // to report. The script leaves them pending (`pending`), for their letter to ack (writeDeletedLetter); Redis 7's
  // XCLAIM, without the script, has dropped them. An id no longer pending was settled by another consumer
  // (reclaimed, run, acked), deleted since or not: nothing to report.
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
      // No longer pending: acked by another delivery, or deleted. XCLAIM has dropped a deleted id already,
      // so an entry another consumer settled and a trim removed since is taken for deleted too: only the
      // script tells them apart (see the docs).
      const found = await command(client, ['XRANGE', stream, id, id]);
      if (Array.isArray(found) && found.length === 0) deleted.push(id);
    }
    return { deleted, pending: false };
  };
  // A held entry's idle time set, unless it was found deleted before (it then stays so).
  const setHeldIdle = async (id: string, held: HeldEntry, idleMs: number): Promise<void> => {
    if (held.deleted) return;
    const found = await setIdle([id], idleMs);
    if (found.deleted.length === 0) return;
    held.deleted = true;
    held.dropped = !found.pending;
  };

  // Whether a dead letter's XADD and its entry's XACK go as one script: until Redis refuses to run it
  // (isScriptRefused), then two commands, as before the script.
  let atomicLetters = true;
  // Write the letter `fields` of entry `id` and ack the entry as one script, that writes only while the id
  // is pending (scripts/dead-letter-2.lua): no crash or failed command can fall between the two, the id
  // leaves the pending list only with its letter written. Resolves to false when it no longer was pending
  // (its letter written, or the entry acked, by another delivery or consumer), having done nothing, and to
  // undefined, having done nothing, where the script cannot run (refused, or too many fields).
  const atomicLetter = async (
    id: string,
    fields: CommandArgument[],
  ): Promise<boolean | undefined> => {
    if (!atomicLetters || fields.length > MAX_SCRIPT_FIELDS) return undefined;
    try {
      const reply = await runScript(
        DEAD_LETTER_SCRIPT,
        [stream, deadLetterStream],
        [group, id, ...fields],
      );
      // An integer reply: 0 from both clients (node-redis, ioredis) when the entry was not pending.
      return reply !== 0;
    } catch (error) {
      if (!isScriptRefused(error)) throw error;
      atomicLetters = false;
      return undefined;
    }
  };
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
    await command(client, ['XADD', deadLetterStream, '*', ...fields]);
    await ack(id);
    return true;
  };

  // An entry deleted while pending (deleted-entries.ts): reported, unless another consumer recorded it
  // first, and recorded in the dead-letter stream, with its fields when this process holds them, and acked
  // with it (writeDeletedLetter; `pending`: the id was left pending by a script). Rejects, reported too,
  // if it cannot be recorded.
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

  const deadLetter = async (
    entry: StreamEntry,
    deliveryCount: number,
    letter: DeadLetter,
    held: HeldEntry,
  ): Promise<typeof NOT_WRITTEN | undefined> => {
    const fields = letterFields(storedFields(entry), {
      reason: letter.reason,
      error: letter.error,
      deliveries: letter.deliveryCount,
      consumer: letter.consumer,
      failedAt: letter.failedAt,
      entryId: entry.id,
    });
    if (held.dropped) {
      // Deleted while held, and dropped from the pending list by this delivery's own XCLAIM (no set-idle
      // script): no other delivery of it can come, and the script, finding it not pending, would write
      // nothing. Its fields are only here: written as the letter decided on; nothing left to ack. (Found
      // deleted by the script, it is still pending: its letter goes below, as any, and acks it.)
      const started = performance.now();
      try {
        await command(client, ['XADD', deadLetterStream, '*', ...fields]);
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
    }
    // One operation, and only for an entry still pending: a second write of the same letter (a
    // redelivery's, or a late one given up on) writes nothing, and says so, that this delivery is not
    // reported as a letter written.
    const written = await atomicLetter(entry.id, fields);
    if (written !== undefined) return written ? undefined : NOT_WRITTEN;
    // Two commands: an XACK that failed after its XADD landed (or a lost XADD reply, a crash between the
    // two) left the entry pending with its letter written. A later delivery than the one that decided the
    // letter looks for it in the dead-letter stream before writing it again (letter-written.ts); the one
    // that decided it wrote nothing before. Not at most once against a write still in flight (given up on
    // past brokerTimeout) that lands after a redelivery looked: only the script is atomic.
    if (
      deliveryCount <= letter.deliveryCount ||
      !(await letterWritten(client, deadLetterStream, entry.id, letter))
    ) {
      await command(client, ['XADD', deadLetterStream, '*', ...fields]);
    }
    await ack(entry.id);
    return undefined;
  };

  const inFlight = new InFlight(resolved.concurrency);
  // Settle calls still going after their delivery settled: a dead letter (or a retry) given up on past
  // brokerTimeout frees its slot but goes on, and a letter landing late fires onDeadLetter then
  // (consumer/settle.ts). close() waits for them too, within drainTimeout: after it resolved, no letter is
  // written and no hook fires.
  const settling = new Set<Promise<unknown>>();
  const tracked = <T>(call: Promise<T>): Promise<T> => {
    settling.add(call);
    const forget = () => settling.delete(call);
    call.then(forget, forget);
    return call;
  };
  const stop = new AbortController();
  // The ids of the entries this process is handling (see `reclaim`).
  const handling = new Set<string>();
  // Resolves to false, starting nothing, when close() began while it waited for a slot.
  const start = async (entry: StreamEntry, deliveryCount: number): Promise<boolean> => {
    await inFlight.acquire();
    if (stop.signal.aborted) {
      inFlight.release();
      return false;
    }
    const held: HeldEntry = { deleted: false, dropped: false };
    handling.add(entry.id);
    inFlight.run(() =>
      processDelivery(resolved, handler, {
        message: entry,
        deliveryCount,
        // A delivery handed back by close() is recorded (handBack below), and not counted against
        // maxDeliveries when a handler error would dead-letter the entry.
        mayHandBack: true,
        // Entry ids are never reused in a stream, and time-based across a stream deleted and re-created.
        brokerId: `${stream}:${entry.id}`,
        ack: () => ack(entry.id),
        retry: (delayMs) =>
          tracked(
            (async () => {
              await setHeldIdle(entry.id, held, Math.max(minIdleMs - Math.ceil(delayMs), 0));
              // Gone from the stream: no redelivery will come. Recorded with its fields instead of
              // waited for in vain (and acked with its letter, where the script left it pending).
              if (held.deleted) await reportDeleted(entry.id, !held.dropped, entry);
            })(),
          ),
        deadLetter: (letter) => tracked(deadLetter(entry, deliveryCount, letter, held)),
        touch: () => setHeldIdle(entry.id, held, 0),
        // At most a timer's limit (a minIdle of months): past it the entry would be touched in a loop.
        touchIntervalMs: Math.min(Math.max(Math.floor(minIdleMs / 3), 10), MAX_TIMER_MS),
      }).finally(() => handling.delete(entry.id)),
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
  const loopCommand = async <T>(sent: Promise<T>, what: string, ms = resolved.brokerTimeoutMs) => {
    const answer = await awaitLoopCommand(sent, {
      ms,
      what,
      report: (error) => reportError('read', error),
      closed,
    });
    if (answer === ABANDONED) abandoned = true;
    return answer;
  };
  let cursor = '0-0';
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

  // Whether claim rounds go through the reclaim script (scripts/reclaim-1.lua): until Redis refuses to run
  // it (an ACL user denied EVAL, a proxy without it), then XAUTOCLAIM and an XPENDING per entry, as before.
  let scriptedClaims = true;

  /**
   * One claim round's entries, with their delivery counts, and the ids found deleted while pending:
   * still pending when the script found them (`pending`), perhaps dropped by `XAUTOCLAIM` otherwise.
   */
  async function claimRound(count: number): Promise<
    | {
        cursor: string;
        entries: StreamEntry[];
        deleted: string[];
        counts: number[];
        pending: boolean;
      }
    | typeof ABANDONED
  > {
    if (scriptedClaims) {
      try {
        const reply = await loopCommand(
          runScript(
            RECLAIM_SCRIPT,
            [stream],
            [
              group,
              consumer,
              String(minIdleMs),
              cursor,
              String(Math.min(count, MAX_SCRIPT_CLAIMS)),
              String(lookAt(Math.min(count, MAX_SCRIPT_CLAIMS))),
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
        scriptedClaims = false;
        // The script's cursor is exclusive (`(id`), a form XAUTOCLAIM does not take: start over.
        cursor = '0-0';
      }
    }
    const reply = await loopCommand(
      readCommand(client, [
        'XAUTOCLAIM',
        stream,
        group,
        consumer,
        String(minIdleMs),
        cursor,
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

  async function reclaim(count: number): Promise<void> {
    const claimed = await claimRound(count);
    if (claimed === ABANDONED) return;
    cursor = claimed.cursor;
    // Deleted while pending, and idle past minIdle (abandoned by a consumer that crashed, or one whose
    // entry waits for its retry): nothing left to deliver. Reported and recorded (deleted-entries.ts), the
    // letter and the ack in one script: the script left the id pending, so one whose record fails (or
    // whose process dies first) stays so, to be recorded at a later round. Without it, XADD then XACK
    // (Redis 6.2 keeps such an id pending; Redis 7's XAUTOCLAIM has dropped it already).
    // One this process handles is left to its holder: it settles it, with its fields (an idle reset that
    // found it deleted stops resetting it, so it turns idle). XAUTOCLAIM (where the script is refused) also
    // drops the ids of entries a live consumer of another process handles: they cannot be told apart here
    // (see the docs).
    const deleted = claimed.deleted.filter((id) => !handling.has(id));
    if (deleted.length > 0) {
      await loopCommand(
        Promise.allSettled(deleted.map((id) => reportDeleted(id, claimed.pending))),
        'XADD',
      );
    }
    await startAll(claimed.entries, claimed.counts);
    if (cursor === '0-0') nextClaimAt = Date.now() + claimMs;
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
            cursor = '0-0';
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
        // Then the settle calls their deliveries gave up on (see `settling`), within what is left.
        const settled =
          settling.size === 0 ||
          (await settlesWithin(
            Promise.allSettled([...settling]),
            Math.max(deadline - performance.now(), 0),
          ));
        // `abandoned` also when the loop ended by abandoning a command known hung (loop-command.ts).
        return !abandoned && drained && settled;
      })();
      return closing;
    },
  };
}

/** What one delivery knows of its entry beyond the entry itself. */
interface HeldEntry {
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
interface FoundDeleted {
  /** The ids, in order. */
  deleted: string[];
  /** Still pending (the set-idle script leaves them so), or dropped by Redis 7's `XCLAIM`. */
  pending: boolean;
}

/**
 * Whether `error` says Redis refused the dead-letter script before running any of it: Redis Cluster with
 * `stream` and `deadLetterStream` in different slots (`CROSSSLOT`; a shared hash tag avoids it), or a user
 * whose ACL denies `EVAL` (`NOPERM … 'eval'`), or a server or proxy without it (`unknown command`). Not an
 * error raised inside the script (an `XADD` to a key of another type): the script writes nothing before
 * that can fail, and such an error is the letter's failure, as an `XADD`'s would be.
 */
function isScriptRefused(error: unknown): boolean {
  const message = String((error as Error | undefined)?.message);
  // Redis 7 quotes the command's name in single quotes, Redis 6.2 (and proxies copying it) in backticks.
  return (
    message.startsWith('CROSSSLOT') || /^NOPERM.*'eval'|unknown command [`']eval[`']/i.test(message)
  );
}

/**
 * Whether `error` says the group is gone: `NOGROUP` (the group destroyed, or the stream deleted), or, for a
 * read blocked when the stream was deleted, `UNBLOCKED the stream key no longer exists` (Redis 7).
 */
function isGroupGone(error: unknown): boolean {
  const message = String((error as Error | undefined)?.message);
  return message.includes('NOGROUP') || message.startsWith('UNBLOCKED');
}
