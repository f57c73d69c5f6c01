/**
 * The Redis store's optional replica acknowledgement (`waitForReplicas`): after each call that writes, a
 * `WAIT <count> <timeoutMs>` on the same connection, so the call answers only once that many replicas have
 * acknowledged the connection's writes, or once the timeout has passed. Redis replication is
 * asynchronous: a claim acknowledged by the primary alone is lost if the primary dies before a replica got
 * it, and after the failover a retry runs the handler again. `WAIT` narrows that window; it does not close
 * it (a replica that did not acknowledge can still be promoted, and acknowledged writes live in the
 * replicas' memory only). See docs/stores/redis.md, "Durability limits".
 *
 * The `WAIT` is sent on the script call's connection after it (both clients send one connection's
 * commands in order), so it covers that call's writes at no extra round trip; the calls of one turn of
 * the event loop share one (see {@link ReplicaWaiter}). After a `NOSCRIPT` the script is sent again with
 * `EVAL`, behind that first `WAIT`: a later `WAIT` follows it.
 * @module
 */
import { type Duration, MAX_TIMER_MS } from '../core/duration.js';
import {
  InvalidOptionsError,
  ReplicationShortError,
  StoreUnavailableError,
} from '../core/errors.js';
import {
  durationOption,
  knownFields,
  positiveIntegerOption,
  shownValue,
} from '../core/option-checks.js';
import type { RedisArg, RedisCommander } from './client.js';
import { replyNumber } from './replies.js';
import { asEval, isNoScriptError, type LoadedScript } from './script-runner.js';

/** `RedisStoreOptions.waitForReplicas`: how many replicas must acknowledge each write, and how long to wait. */
export interface WaitForReplicasOptions {
  /** Replicas that must acknowledge the writes (`WAIT`'s `numreplicas`); a positive integer. */
  count: number;
  /**
   * How long `WAIT` blocks for them, in ms (at least 1: Redis reads 0 as "forever"), or a duration string
   * such as `'100ms'`. Below the store's `timeoutMs`, which bounds the whole call.
   */
  timeoutMs: Duration;
}

/** {@link WaitForReplicasOptions} checked: whole numbers, and the `WAIT` command they make. */
export interface ReplicaWait {
  /** Replicas that must acknowledge. */
  readonly count: number;
  /** How long `WAIT` blocks, in whole ms (at least 1). */
  readonly timeoutMs: number;
  /** `WAIT <count> <timeoutMs>`. */
  readonly command: readonly RedisArg[];
}

const FIELDS = ['count', 'timeoutMs'];
const NAME = 'redisStore: waitForReplicas';

/**
 * Check `waitForReplicas` (`undefined` when absent or `null`: no `WAIT`).
 * @param callTimeoutMs - the store's `timeoutMs`: a `WAIT` as long as that would always lose the race.
 * @param cluster - true for a cluster client, which is refused (see the docs: no way to send `WAIT` to
 *   the node a script ran on through either library's cluster client).
 * @throws InvalidOptionsError for anything else than `{ count, timeoutMs }` with a positive integer count
 *   and a whole number of ms from 1 to below `callTimeoutMs`.
 */
export function waitForReplicasOption(
  value: unknown,
  callTimeoutMs: number,
  cluster: boolean,
): ReplicaWait | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidOptionsError(
      `${NAME}: expected an object { count, timeoutMs }, got ${shownValue(value)}`,
    );
  }
  knownFields(value, NAME, FIELDS);
  const options = value as Partial<WaitForReplicasOptions>;
  if (options.count === undefined || options.count === null) {
    throw new InvalidOptionsError(`${NAME}: count is required (replicas that must acknowledge)`);
  }
  if (options.timeoutMs === undefined || options.timeoutMs === null) {
    throw new InvalidOptionsError(
      `${NAME}: timeoutMs is required (a WAIT with 0 blocks until the replicas answer, however long)`,
    );
  }
  const count = positiveIntegerOption(options.count, `${NAME}.count`, 1);
  const timeoutMs = durationOption(options.timeoutMs, `${NAME}.timeoutMs`, 0, {
    maxMs: MAX_TIMER_MS,
    integer: true,
  });
  if (timeoutMs >= callTimeoutMs) {
    throw new InvalidOptionsError(
      `${NAME}.timeoutMs: must be below the store's timeoutMs (${callTimeoutMs} ms), which bounds the whole call, got ${shownValue(options.timeoutMs)}`,
    );
  }
  if (cluster) {
    throw new InvalidOptionsError(
      `${NAME}: not supported with a cluster client: a keyless WAIT cannot be sent to the node that ran a script (ioredis sends it to any node; after a MOVED, node-redis runs the script on another node)`,
    );
  }
  return { count, timeoutMs, command: ['WAIT', String(count), String(timeoutMs)] };
}

/** What a `WAIT` answered: how many replicas acknowledged (`-1` when the `WAIT` itself failed). */
export interface WaitAnswer {
  /** Replicas that acknowledged every write sent before the `WAIT` (`-1`: it failed). */
  readonly replicas: number;
  /** The `WAIT`'s error, when it failed (a server that refuses `WAIT`, a lost connection). */
  readonly waitError?: unknown;
}

/** A write call's reply, and the answer of the `WAIT` sent behind it. */
export interface Acknowledged extends WaitAnswer {
  /** The script call's reply. */
  readonly reply: unknown;
}

const ignore = () => undefined;

/**
 * Sends the store's script calls, each followed by a `WAIT` on the same connection. The calls made in one
 * turn of the event loop share one `WAIT`, sent once that turn's calls are written (`setImmediate`): a
 * `WAIT` covers every write its connection sent before it, so one `WAIT` sent after all of them covers
 * each. Without sharing, fifty concurrent single calls sent fifty `WAIT`s, each blocking the connection
 * for a replica round trip in turn (measured: a quarter of the throughput without the option).
 *
 * The invariant that makes it correct: a call only joins a `WAIT` that has not been sent yet, so it is sent
 * after the call's script; the shared one is forgotten the moment it is sent.
 */
export class ReplicaWaiter {
  private next: Promise<WaitAnswer> | undefined;

  constructor(
    private readonly commander: RedisCommander,
    /** The `WAIT` to send. */
    readonly wait: ReplicaWait,
  ) {}

  /**
   * A script call (built by `scriptCommand`) and the `WAIT` behind it: the script's reply and the replicas
   * that acknowledged it. After `NOSCRIPT` (the script did not run) the `EVAL` joins a later `WAIT`.
   */
  sendScript(script: LoadedScript, command: ReadonlyArray<RedisArg>): Promise<Acknowledged> {
    const key = command[3] as string | undefined;
    return this.sendAndWait(key, command).catch((error: unknown) => {
      if (!isNoScriptError(error)) throw error;
      return this.sendAndWait(key, asEval(script, command));
    });
  }

  /** `command`, then the `WAIT` that follows it; fails as `command` fails (the `WAIT` is then moot). */
  private sendAndWait(
    key: string | undefined,
    command: ReadonlyArray<RedisArg>,
  ): Promise<Acknowledged> {
    const sent = this.commander.send(key, command);
    // Joined after the command is sent: this WAIT has not been, so it will follow the command.
    const waited = this.waitAfterSent();
    return sent.then(
      (reply) =>
        waited.then((answer) => ({
          reply,
          replicas: answer.replicas,
          waitError: answer.waitError,
        })),
      (error: unknown) => {
        waited.catch(ignore);
        throw error;
      },
    );
  }

  /** The `WAIT` to be sent at the end of this turn of the event loop (scheduled by the first caller). */
  private waitAfterSent(): Promise<WaitAnswer> {
    if (this.next !== undefined) return this.next;
    const next = new Promise<WaitAnswer>((resolve) => {
      setImmediate(() => {
        // Forgotten before it is sent: a call whose script is sent from now on needs a later WAIT.
        this.next = undefined;
        waitBehind(this.commander, this.wait).then(resolve);
      });
    });
    this.next = next;
    return next;
  }
}

/** A `WAIT`, sent now: its count, or -1 and its error. Never rejects. */
function waitBehind(commander: RedisCommander, wait: ReplicaWait): Promise<WaitAnswer> {
  const failed = (error: unknown): WaitAnswer => ({ replicas: -1, waitError: error });
  let sent: Promise<unknown>;
  try {
    sent = commander.send(undefined, wait.command);
  } catch (error) {
    return Promise.resolve(failed(error));
  }
  return sent.then((count) => {
    try {
      return { replicas: replyNumber(count) };
    } catch (error) {
      return failed(error);
    }
  }, failed);
}

/** How a `WAIT` fell short, for the messages: the replicas' count, or the `WAIT`'s own failure. */
function shortfall(acknowledged: WaitAnswer, wait: ReplicaWait): string {
  const { waitError } = acknowledged;
  return waitError === undefined
    ? `acknowledged by ${acknowledged.replicas} of ${wait.count} replica(s) within ${wait.timeoutMs} ms`
    : `not confirmed by replicas: WAIT failed (${waitError instanceof Error ? waitError.message : String(waitError)})`;
}

/** True when fewer replicas than asked acknowledged the call (or the `WAIT` failed). */
export function fellShort(acknowledged: WaitAnswer, wait: ReplicaWait): boolean {
  return acknowledged.replicas < wait.count;
}

/**
 * Why a write is refused when fewer replicas than asked acknowledged it (or the `WAIT` failed), with the
 * `WAIT`'s error as `cause`. A call refused as a whole throws it from its decoding, and the store's guard
 * makes it the `StoreUnavailableError` (`Redis store: <operation> failed: …`) its caller gets.
 */
export function replicasShortReason(acknowledged: WaitAnswer, wait: ReplicaWait): Error {
  const { waitError } = acknowledged;
  return new Error(
    `it was written on the primary but ${shortfall(acknowledged, wait)}, so it is not used (waitForReplicas)`,
    waitError === undefined ? undefined : { cause: waitError },
  );
}

/**
 * The error of one refused claim of a batch, as the guard would have made it of a single call's: the store
 * is unavailable (the engine runs nothing; HTTP 503, a consumer's redelivery).
 */
export function replicasShortError(
  operation: string,
  acknowledged: WaitAnswer,
  wait: ReplicaWait,
): StoreUnavailableError {
  const reason = replicasShortReason(acknowledged, wait);
  return new StoreUnavailableError(`Redis store: ${operation} failed: ${reason.message}`, {
    cause: reason,
  });
}

/**
 * What a write the handler's effect depends on (a completion, a release, a step's result) is answered
 * with when fewer replicas than asked acknowledged it: it is applied, so it is neither failed nor refused,
 * but its caller is told (the engine reports it through `onReplicationShort` and goes on with `result`).
 * @param result - the write's answer (true: it was applied; a write that changed nothing is never short).
 */
export function replicationShortError(
  operation: string,
  acknowledged: WaitAnswer,
  wait: ReplicaWait,
  result: boolean,
): ReplicationShortError {
  const { waitError } = acknowledged;
  return new ReplicationShortError(
    { operation, result, acknowledged: acknowledged.replicas, required: wait.count },
    `Redis store: ${operation} was applied on the primary but ${shortfall(acknowledged, wait)} (waitForReplicas): a failover before the replicas have it can lose it`,
    waitError === undefined ? undefined : { cause: waitError },
  );
}

/**
 * A batch of such writes whose `WAIT` fell short: each applied item (`true`) replaced by its
 * {@link replicationShortError}, the others kept (`false`: fenced out, nothing written). Returns how many
 * items are errors now.
 */
export function markShortItems(
  operation: string,
  items: Array<boolean | Error>,
  acknowledged: WaitAnswer,
  wait: ReplicaWait,
): number {
  let errors = 0;
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    if (item === true) items[i] = replicationShortError(operation, acknowledged, wait, true);
    if (item !== false) errors++;
  }
  return errors;
}
