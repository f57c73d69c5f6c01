/**
 * The relay: claims unsent outbox rows, publishes each with its stable id, marks the published ones sent by
 * id, retries failures with backoff, and purges sent rows after the retention period. Several relays (in one
 * process or many) may run over the same table.
 * @module
 */

import { performance } from 'node:perf_hooks';
import { type Duration, MAX_DURATION_MS, MAX_TIMER_MS } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import { ignoreRejection } from '../core/hooks.js';
import { knownFields, positiveIntegerOption } from '../core/option-checks.js';
import { type Backoff, type BackoffOptions, exponentialBackoff } from './backoff.js';
import { type DurationBounds, durationMs } from './durations.js';
import { describeError } from './errors.js';
import type { OutboxMessage } from './message.js';
import type { Publisher } from './publisher.js';
import type { ClaimedMessage, OutboxSource, OutboxStats } from './source.js';

/**
 * Options of {@link createRelay}. Every `…Ms` option takes milliseconds or a duration string like the
 * engine's (`'500ms'`, `'30s'`, `'7d'`); a string without a unit (`'1000'`) is refused, not converted.
 */
export interface RelayOptions {
  /** Where the rows are: `postgresOutboxSource(…)` or `sqliteOutboxSource(…)`. */
  source: OutboxSource;
  /** Where they go: a broker publisher or the in-process bus. */
  publisher: Publisher;
  /** Rows claimed per round. @default 100 */
  batchSize?: number;
  /**
   * Payload bytes claimed per round, besides `batchSize`: a row is claimed only while the rows before it in
   * the claim total less, so a round holds less than this plus one payload in memory (and always claims one
   * row, however large). A round that reaches it is followed by the next at once, like a full batch.
   * @default 67108864 (64 MiB)
   */
  maxBatchBytes?: number;
  /** Publishes in flight at once within a batch. @default 10 */
  concurrency?: number;
  /**
   * Wait between rounds when the outbox is empty and no notification arrives. It is also how fast a relay
   * notices new rows when notifications are off or broken. @default 1000
   */
  pollIntervalMs?: Duration;
  /**
   * How long a claim keeps rows away from other relays. A relay that dies mid-batch delays its rows by this
   * much; a batch still publishing (or not yet marked) when it ends could be published twice, so the relay
   * stops starting publishes once `publishTimeoutMs` plus 5 % of the lease (for the mark) no longer fits in
   * what is left of it. @default 30000
   */
  leaseMs?: Duration;
  /**
   * A publish not confirmed within this time counts as failed (and is retried). At most 90 % of `leaseMs`:
   * the rest is for the claim and the mark. @default 10000
   */
  publishTimeoutMs?: Duration;
  /**
   * Delays between attempts of a failing row: `{ initialMs, maxMs, multiplier, jitter }` (no other field:
   * a consumer's `initial`, `max` and `factor` are refused), or a function of the attempt number (a
   * function returning anything but a delay from 0 to 100 years is reported to `onError`, and the default is used).
   * After a full round (by count or bytes) that published nothing, a delay is at least `pollIntervalMs`: the
   * next claim comes at once, and rows back at once would be all it claimed, again and again.
   * @default exponential 1 s → 60 s, ×2, 20 % jitter
   */
  backoff?: BackoffOptions | Backoff;
  /** How long sent rows are kept before purging (for audit and debugging). @default 604800000 (7 days) */
  retentionMs?: Duration;
  /** How often the running relay purges. `0` turns purging off (call `purge()` yourself). @default 60000 */
  purgeIntervalMs?: Duration;
  /** Rows deleted per purge statement (purge loops until nothing is left). @default 1000 */
  purgeBatchSize?: number;
  /** Wait after the database failed before the next round. @default pollIntervalMs */
  errorDelayMs?: Duration;
  /** Called after each confirmed publish (before the batch is marked sent). */
  onPublished?: (message: OutboxMessage) => void;
  /**
   * Called after each failed publish, with the delay before its next attempt; also for each claimed row
   * the source could not read (its payload empty, the error saying why), which fails every attempt.
   */
  onPublishFailed?: (message: OutboxMessage, error: unknown, retryInMs: number) => void;
  /** Called when the database or the notification channel fails; the relay keeps going. */
  onError?: (error: unknown) => void;
}

/** What one round did. */
export interface RelayRoundResult {
  /** Rows claimed. */
  claimed: number;
  /** Rows published and marked sent. */
  published: number;
  /** Rows whose publish failed (kept, retried after the backoff). */
  failed: number;
  /**
   * Rows claimed but not attempted: the lease was running out (retried after the lease), or the relay was
   * stopping (handed back at once when the source can, else retried after the lease).
   */
  deferred: number;
}

/** A running or stopped relay. */
export interface Relay {
  /**
   * Start the background loop (idempotent). Called while a `stop()` is still finishing, it starts the loop
   * again once that stop is done.
   */
  start(): void;
  /**
   * Stop gracefully: no new round starts, and the round in flight starts no new publish: its publishes in
   * flight end (confirmed or timed out, at most `publishTimeoutMs`) and are marked, its rows not yet
   * started are handed back to be claimed at once, the notification subscription ends. Resolves when all of
   * that is done.
   */
  stop(): Promise<void>;
  /** Run one round now: claim, publish, mark. For tests and custom schedulers. */
  runOnce(): Promise<RelayRoundResult>;
  /**
   * Run rounds until a round claims nothing, and return the totals. Rows waiting out a backoff or a lease are
   * not waited for, and neither are rows that keep failing: drain also ends after a round that published
   * nothing and claimed only rows it had claimed before (with a zero backoff, a row that always fails
   * would otherwise be claimed again at once, for ever).
   */
  drain(): Promise<RelayRoundResult>;
  /** Delete sent rows older than the retention, in batches; never an unsent row. Resolves to the count. */
  purge(): Promise<number>;
  /** Backlog figures from the source (unsent rows, the oldest one's age, …). */
  stats(): Promise<OutboxStats>;
  /** Whether the background loop is running. */
  readonly running: boolean;
}

/** The options of {@link RelayOptions} that are durations. */
type DurationOption =
  | 'pollIntervalMs'
  | 'leaseMs'
  | 'publishTimeoutMs'
  | 'retentionMs'
  | 'purgeIntervalMs'
  | 'errorDelayMs';

/** Attempts at marking a round's published rows sent, and the delay before the second (then 2×, …). */
const MARK_ATTEMPTS = 3;
const MARK_RETRY_DELAY_MS = 100;

/**
 * The part of the lease a publish may not use: what is left for the claim's round trip and the mark. With
 * less, a claim that takes a few milliseconds would leave no room to start any publish, and every round
 * would defer all its rows, forever.
 */
const LEASE_SLACK = 0.1;

// Every key of RelayOptions, checked by the compiler both ways: a misspelt option (`pollInterval`, a
// consumer's spelling) is refused instead of leaving its default in force.
const RELAY_FIELDS = Object.keys({
  source: true,
  publisher: true,
  batchSize: true,
  maxBatchBytes: true,
  concurrency: true,
  pollIntervalMs: true,
  leaseMs: true,
  publishTimeoutMs: true,
  backoff: true,
  retentionMs: true,
  purgeIntervalMs: true,
  purgeBatchSize: true,
  errorDelayMs: true,
  onPublished: true,
  onPublishFailed: true,
  onError: true,
} as const satisfies Record<keyof RelayOptions, true>);

/**
 * Create a relay from an outbox source to a publisher. Nothing happens until `start()` (or `runOnce()`).
 *
 * Guarantees: every committed row is published until a publisher confirms it (at-least-once); rows are
 * marked sent by id, so a late-committing row is never skipped; unsent rows are never deleted. Not
 * guaranteed: exactly-once delivery (a crash between the broker's confirm and the mark re-publishes, with the
 * same id, for the consumer to deduplicate) and ordering (a batch is published concurrently, and a failed row
 * is retried later).
 * @example
 * const relay = createRelay({
 *   source: postgresOutboxSource({ pool }),
 *   publisher: amqpPublisher({ channel, exchange: 'events' }),
 *   retentionMs: 24 * 3600_000,
 * });
 * relay.start();
 * process.on('SIGTERM', () => void relay.stop());
 */
export function createRelay(options: RelayOptions): Relay {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionsError('createRelay: expected options { source, publisher }');
  }
  knownFields(options, 'createRelay', RELAY_FIELDS);
  const { source, publisher } = options;
  if (typeof source?.claim !== 'function') {
    throw new InvalidOptionsError('createRelay: `source` must be an OutboxSource');
  }
  if (typeof publisher?.publish !== 'function') {
    throw new InvalidOptionsError('createRelay: `publisher` must have publish(message)');
  }
  // Counts are not rounded: flooring 0.5 to 0 would claim nothing in a loop that never sleeps
  // (batchSize), claim rows and never publish them (concurrency), or purge forever (purgeBatchSize).
  const count = (
    name: 'batchSize' | 'maxBatchBytes' | 'concurrency' | 'purgeBatchSize',
    fallback: number,
  ) => positiveIntegerOption(options[name], `createRelay: ${name}`, fallback);
  const duration = (name: DurationOption, fallback: number, bounds?: DurationBounds) =>
    durationMs(options[name], `createRelay: ${name}`, fallback, bounds);
  // setTimeout fires at once (with a warning) above 2^31-1 ms: a timeout would fail every publish, a poll
  // interval would spin. The lease and the retention are not timers.
  const timer = { maxMs: MAX_TIMER_MS };
  const batchSize = count('batchSize', 100);
  const maxBatchBytes = count('maxBatchBytes', 64 * 1024 * 1024);
  const concurrency = count('concurrency', 10);
  const pollIntervalMs = duration('pollIntervalMs', 1000, timer);
  const leaseMs = duration('leaseMs', 30_000);
  const publishTimeoutMs = duration('publishTimeoutMs', 10_000, timer);
  const retentionMs = duration('retentionMs', 7 * 24 * 3600_000, { allowZero: true });
  const purgeIntervalMs = duration('purgeIntervalMs', 60_000, { allowZero: true });
  const purgeBatchSize = count('purgeBatchSize', 1000);
  const errorDelayMs = duration('errorDelayMs', pollIntervalMs, { allowZero: true, ...timer });
  if (publishTimeoutMs > leaseMs * (1 - LEASE_SLACK)) {
    throw new InvalidOptionsError(
      `createRelay: publishTimeoutMs must be at most ${100 - LEASE_SLACK * 100} % of leaseMs (the rest is for the claim and the mark)`,
    );
  }
  // Half of the slack: the claim may use the other half before a round must defer everything.
  const markReserveMs = (leaseMs * LEASE_SLACK) / 2;
  const defaultBackoff = exponentialBackoff();
  const backoff: Backoff =
    typeof options.backoff === 'function'
      ? options.backoff
      : exponentialBackoff(options.backoff ?? undefined);
  const report = (error: unknown) => {
    try {
      ignoreRejection(options.onError?.(error));
    } catch {
      // A throwing (or rejecting) hook must not stop the relay.
    }
  };

  let loop: Promise<void> | undefined;
  let stopping = false;
  // Counts stop() calls: a round that sees it change stops starting publishes. (`stopping` alone would
  // also stop a runOnce() called after the relay was stopped.)
  let stopRequests = 0;
  let pendingWake = false;
  let wakeWaiter: (() => void) | undefined;
  let lastPurge = performance.now();
  const inFlight = new Set<Promise<unknown>>();

  const wake = () => {
    pendingWake = true;
    wakeWaiter?.();
  };

  // Resolves on a wake-up, a stop, or after `ms`.
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      if (pendingWake || stopping) return resolve();
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wakeWaiter = undefined;
        resolve();
      }
      wakeWaiter = done;
    });

  async function publishOne(message: OutboxMessage): Promise<unknown> {
    let timer: NodeJS.Timeout | undefined;
    // Aborted when the relay gives up on the publish, so the publisher can free what it keeps for the
    // confirm (the AMQP publisher's return watch): on a channel that hangs without closing, none comes.
    const givenUp = new AbortController();
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new Error(`publish not confirmed within ${publishTimeoutMs} ms`);
        givenUp.abort(error);
        reject(error);
      }, publishTimeoutMs);
    });
    try {
      await Promise.race([publisher.publish(message, { signal: givenUp.signal }), timeout]);
      return undefined;
    } catch (error) {
      return error ?? new Error('publish rejected');
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * A round's result, the rows it claimed (for {@link Relay.drain}), and whether its claim was cut by
   * `batchSize` or `maxBatchBytes` (more rows may be waiting: the loop claims again without sleeping).
   */
  interface RoundOutcome {
    result: RelayRoundResult;
    rowIds: string[];
    full: boolean;
  }

  async function round(): Promise<RoundOutcome> {
    const claimedAt = performance.now();
    const stopsBefore = stopRequests;
    const messages: ClaimedMessage[] = await source.claim(batchSize, leaseMs, maxBatchBytes);
    // A claim cut by the byte budget holds less than batchSize rows but at least maxBatchBytes of payload
    // (it takes rows until the total reaches it). An unreadable row's size is not known here, but it is
    // over what node-postgres reads (256 MiB), past any sensible budget: counted as cutting the claim.
    let claimedBytes = 0;
    let unreadable = false;
    for (const message of messages) {
      claimedBytes += message.payload.byteLength;
      if (message.unreadable !== undefined) unreadable = true;
    }
    const full = messages.length >= batchSize || claimedBytes >= maxBatchBytes || unreadable;
    const sent: string[] = [];
    const failures: Array<{ message: OutboxMessage; error: unknown }> = [];
    const unstarted: OutboxMessage[] = [];
    let deferred = 0;
    let next = 0;
    const worker = async () => {
      while (next < messages.length) {
        const message = messages[next++]!;
        // Nothing to publish: failed like a refused publish (backoff, last_error, onPublishFailed), whether
        // stopping or not. Left out of the batch, it used to reach last_error only, no hook.
        if (message.unreadable !== undefined) {
          failures.push({ message, error: new Error(message.unreadable) });
          continue;
        }
        // Stopping: no new publish. Going through the batch would make stop() wait a publishTimeoutMs per
        // wave when the broker does not answer, up to nearly the lease (a process killed meanwhile leaves
        // its confirmed rows unmarked); the rows are handed back below instead.
        if (stopRequests !== stopsBefore) {
          unstarted.push(message);
          continue;
        }
        // Only start a publish that is sure to end (confirm or timeout) before the lease does, with time
        // left for the mark; otherwise another relay could claim the row while it is still being published,
        // or re-publish the batch's confirmed rows before they are marked.
        if (performance.now() - claimedAt + publishTimeoutMs > leaseMs - markReserveMs) {
          deferred++;
          continue;
        }
        const error = await publishOne(message);
        if (error === undefined) {
          sent.push(message.rowId);
          try {
            ignoreRejection(options.onPublished?.(message));
          } catch {
            // Monitoring hooks never change the outcome.
          }
        } else {
          failures.push({ message, error });
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, messages.length) }, worker));
    // Every step below runs whatever the ones before did: a mark that failed for good, or one failure
    // record that threw, used to end the round there, so the round's other failures were neither recorded
    // nor reported (back after the lease, not the backoff, and unseen by onPublishFailed). The first
    // database error still fails the round (onError, or runOnce() rejects); any later one is reported.
    const storeErrors: unknown[] = [];
    // Marked by id: exactly the rows this round published, whatever their ids relative to others.
    await markSentWithinLease(sent, claimedAt).catch((error: unknown) => storeErrors.push(error));
    // A full round is followed by the next claim at once. When it published nothing, a failure retried
    // sooner than the poll interval (a zero backoff) would be claimed again at once, first in claim order:
    // the loop claimed the same rows without a pause (CPU and database), and when they filled the claim
    // (one row over maxBatchBytes, or batchSize failing rows) the rows behind them were never claimed.
    const minRetryMs = full && sent.length === 0 ? pollIntervalMs : 0;
    for (const { message, error } of failures) {
      const retryInMs = Math.max(retryDelay(message.attempt), minRetryMs);
      // With the database failing, records are tried only while the lease lasts: past it the rows are
      // claimable anyway, and a round of 100 failures × a connection timeout would hold stop() for minutes.
      const worthTrying = storeErrors.length === 0 || performance.now() - claimedAt < leaseMs;
      try {
        // With its attempt: a record landing after the lease ran out (a slow database) changes nothing.
        if (worthTrying) {
          await source.markFailed(message.rowId, retryInMs, describeError(error), message.attempt);
        }
      } catch (storeError) {
        // Not recorded: the row comes back after the lease. The failure is reported all the same.
        storeErrors.push(storeError);
      }
      try {
        ignoreRejection(options.onPublishFailed?.(message, error, retryInMs));
      } catch {
        // Monitoring hooks never change the outcome.
      }
    }
    if (unstarted.length > 0) await releaseUnstarted(unstarted);
    if (storeErrors.length > 0) {
      for (const storeError of storeErrors.slice(1)) report(storeError);
      throw storeErrors[0];
    }
    if (deferred > 0 && deferred === messages.length) {
      // Nothing could start: the claim alone ate the lease's slack. Rows come back after the lease only to
      // be deferred again, so say so rather than look idle.
      report(
        new Error(
          `outbox relay: deferred all ${deferred} claimed rows: the claim took ${Math.round(performance.now() - claimedAt)} ms, leaving less than publishTimeoutMs (${publishTimeoutMs} ms) of the ${leaseMs} ms lease`,
        ),
      );
    }
    return {
      result: {
        claimed: messages.length,
        published: sent.length,
        failed: failures.length,
        deferred: deferred + unstarted.length,
      },
      rowIds: messages.map((message) => message.rowId),
      full,
    };
  }

  // The rows were confirmed: left unmarked, every one of them is published again once the lease ends. A
  // mark that fails (a dropped connection, a failover) is tried again while the lease lasts, each failure
  // reported; the last one fails the round, as before.
  async function markSentWithinLease(rowIds: string[], claimedAt: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await source.markSent(rowIds);
        return;
      } catch (error) {
        const delayMs = MARK_RETRY_DELAY_MS * attempt;
        if (attempt >= MARK_ATTEMPTS || performance.now() - claimedAt + delayMs >= leaseMs) {
          throw error;
        }
        report(error);
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
    }
  }

  // Rows a stopping relay did not start go back at once, for another relay or the next start. A source
  // without release(), or one that fails (reported), leaves them to come back after the lease.
  async function releaseUnstarted(messages: OutboxMessage[]): Promise<void> {
    if (source.release === undefined) return;
    try {
      await source.release(
        messages.map((message) => ({ rowId: message.rowId, attempt: message.attempt })),
      );
    } catch (error) {
      report(error);
    }
  }

  // A custom backoff that returns NaN, a negative, an infinite delay or one past 100 years (PostgreSQL's
  // interval range ends near 178 million years, but its timestamps in 294,276 AD) would make the mark fail
  // (or, in a source that accepted it, hide the row forever): report it and use the default for this attempt.
  function retryDelay(attempt: number): number {
    let delay: unknown;
    try {
      delay = backoff(attempt);
    } catch (error) {
      delay = error;
    }
    if (typeof delay === 'number' && delay >= 0 && delay <= MAX_DURATION_MS) return delay;
    report(
      new InvalidOptionsError(
        `createRelay: backoff(${attempt}) returned ${delay instanceof Error ? `an error (${delay.message})` : String(delay)}; using the default backoff`,
        { cause: delay },
      ),
    );
    return defaultBackoff(attempt);
  }

  // Rounds are tracked so that stop() waits for the ones started by runOnce() and drain() too.
  function trackedRound(): Promise<RoundOutcome> {
    const promise = round();
    inFlight.add(promise);
    const forget = () => inFlight.delete(promise);
    promise.then(forget, forget);
    return promise;
  }

  async function runOnce(): Promise<RelayRoundResult> {
    return (await trackedRound()).result;
  }

  // The background loop gives up between batches when asked to stop; an explicit purge() runs to the end.
  async function purge(untilStopped = false): Promise<number> {
    let total = 0;
    for (;;) {
      const deleted = await source.purgeSent(retentionMs, purgeBatchSize);
      total += deleted;
      if (deleted < purgeBatchSize || (untilStopped && stopping)) return total;
    }
  }

  async function run(): Promise<void> {
    let unsubscribe: (() => Promise<void>) | undefined;
    if (source.subscribe !== undefined) {
      try {
        unsubscribe = await source.subscribe(wake, report);
      } catch (error) {
        report(error); // Polling still works.
      }
    }
    try {
      while (!stopping) {
        pendingWake = false;
        let full: boolean;
        try {
          if (purgeIntervalMs > 0 && performance.now() - lastPurge >= purgeIntervalMs) {
            lastPurge = performance.now();
            await purge(true);
          }
          full = (await trackedRound()).full;
        } catch (error) {
          report(error);
          await pause(errorDelayMs);
          continue;
        }
        // A full batch (by count or by bytes) means more may be waiting: go again without sleeping.
        if (full) continue;
        await pause(pollIntervalMs);
      }
    } finally {
      await unsubscribe?.().catch(report);
    }
  }

  // Whether the last call was start() rather than stop(): a start() while the previous loop is still
  // winding down (stop() not awaited) must not be lost, so that loop starts a new one as it ends.
  let wanted = false;
  function launch() {
    stopping = false;
    loop = run().finally(() => {
      loop = undefined;
      if (wanted) launch();
    });
  }

  return {
    start() {
      wanted = true;
      if (loop === undefined) launch();
    },
    async stop() {
      wanted = false;
      stopping = true;
      stopRequests++;
      wakeWaiter?.();
      await loop;
      await Promise.allSettled([...inFlight]);
    },
    runOnce,
    async drain() {
      const total: RelayRoundResult = { claimed: 0, published: 0, failed: 0, deferred: 0 };
      const seen = new Set<string>();
      for (;;) {
        const { result, rowIds } = await trackedRound();
        total.claimed += result.claimed;
        total.published += result.published;
        total.failed += result.failed;
        total.deferred += result.deferred;
        if (result.claimed === 0) return total;
        // Only rows this drain already tried, none published: with a backoff of 0 they are claimable
        // again at once and would fail again, and drain() never returned. New rows still go on.
        const fresh = rowIds.filter((rowId) => !seen.has(rowId)).length;
        if (result.published === 0 && fresh === 0) return total;
        for (const rowId of rowIds) seen.add(rowId);
      }
    },
    purge: () => purge(),
    stats: () => source.stats(),
    get running() {
      return loop !== undefined;
    },
  };
}
