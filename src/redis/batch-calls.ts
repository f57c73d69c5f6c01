/**
 * The Redis store's batch calls, `claimMany`, `completeMany` and `completeAndClaimMany`: one script call
 * for the whole batch on a single node. On a Cluster, the keys of a batch live in different slots, which
 * no script may span, so a batch is sent as single calls there, in order per key (pipelined on the
 * clients' connections).
 * @module
 */
import type { ClaimResult } from '../core/record.js';
import { completeThenClaim } from '../store/complete-then-claim.js';
import { PartialBatchError, partialResults } from '../store/partial-batch.js';
import type {
  ClaimRequest,
  CompleteAndClaimResults,
  CompleteRequest,
  Store,
} from '../store/store.js';
import { pushClaimArgs, pushCompleteArgs } from './batch-args.js';
import { type ClaimDurations, durationsOf, retentionsOf } from './call-durations.js';
import { storeFailure } from './guard.js';
import type { RecordKeys } from './record-keys.js';
import type { ShortfallHandlers } from './replica-shortfalls.js';
import { decodeClaims, decodeCompleteAndClaim, decodeFlags } from './replies.js';
import { scriptCommand } from './script-runner.js';
import { scripts } from './store-scripts.js';
import type { Write } from './write-path.js';

/** What the batch calls are made of: the store's single calls and its write path. */
export interface BatchCallParts {
  /** True for a cluster client: every batch is sent as single calls. */
  cluster: boolean;
  /** The store's single claim, for a batch of one and for a Cluster. */
  claimOne: Store['claim'];
  /** The store's single completion, for a batch of one and for a Cluster. */
  completeOne(request: CompleteRequest): Promise<boolean>;
  /** The store's write path (see `write-path.ts`). */
  write: Write;
  /** What each write does when its `WAIT` fell short (only with `waitForReplicas`). */
  shortfalls: ShortfallHandlers | undefined;
  /** Appends a batch's record keys to a command. */
  pushRecordKeys: RecordKeys['pushRecordKeys'];
  /** Appends a batch's steps keys to a command (a claim batch's KEYS, after its record keys). */
  pushStepsKeys: RecordKeys['pushStepsKeys'];
}

/**
 * The batch methods of the Redis store: `Store`'s optional batch methods, which the Redis store always
 * has (see `RedisStore`).
 */
export type BatchCalls = Required<
  Pick<Store, 'claimMany' | 'completeMany' | 'completeAndClaimMany'>
>;

/**
 * Run `one` for every request, in order per key and concurrently across keys (Cluster batches: each call
 * goes to its key's node, and a key repeated in the batch still sees its earlier items first).
 */
async function eachInKeyOrder<Req extends { key: string }, Res>(
  requests: readonly Req[],
  one: (request: Req) => Promise<Res>,
): Promise<Res[]> {
  const results: Res[] = new Array(requests.length);
  const chains = new Map<string, Promise<void>>();
  for (const [i, request] of requests.entries()) {
    const previous = chains.get(request.key) ?? Promise.resolve();
    chains.set(
      request.key,
      previous.then(async () => {
        results[i] = await one(request);
      }),
    );
  }
  await Promise.all(chains.values());
  return results;
}

/**
 * The batch calls of one store. They are not async functions: on the hot path each promise layer costs
 * client CPU. A bad argument still rejects (never throws).
 */
export function batchCalls({
  cluster,
  claimOne,
  completeOne,
  write,
  shortfalls,
  pushRecordKeys,
  pushStepsKeys,
}: BatchCallParts): BatchCalls {
  // The batch paths below use indexed loops and build the script's command in place: per item, every
  // `map`, `flatMap` and spread of a batch is an allocation the client pays for on each message.
  function claimMany(requests: readonly ClaimRequest[]): Promise<ClaimResult[]> {
    const count = requests.length;
    if (count === 0) return Promise.resolve([]);
    if (cluster) return eachInKeyOrder(requests, (r) => claimOne(r.key, r));
    if (count === 1) {
      const [only] = requests as [ClaimRequest];
      return claimOne(only.key, only).then((result) => [result]);
    }
    let durations: ClaimDurations;
    try {
      durations = durationsOf(requests);
    } catch (error) {
      return Promise.reject(error);
    }
    // Each claim's record key, then each one's steps key (claim-many-n.lua).
    const command = scriptCommand(scripts.claimMany, 2 * count);
    pushRecordKeys(command, requests);
    pushStepsKeys(command, requests);
    pushClaimArgs(command, requests, durations);
    return write(
      'claimMany',
      scripts.claimMany,
      command,
      (reply) => decodeClaims(reply, durations.leases, requests),
      shortfalls?.claims,
    );
  }

  /** `completeMany` of items whose retentions are validated and tokens are safe integers. */
  function sendCompletes(
    items: readonly CompleteRequest[],
    retentions: readonly number[],
  ): Promise<boolean[]> {
    const count = items.length;
    if (count === 0) return Promise.resolve([]);
    if (cluster) return eachInKeyOrder(items, completeOne);
    if (count === 1) return completeOne(items[0] as CompleteRequest).then((flag) => [flag]);
    const command = scriptCommand(scripts.completeMany, count);
    pushRecordKeys(command, items);
    pushCompleteArgs(command, items, retentions);
    return write(
      'completeMany',
      scripts.completeMany,
      command,
      (reply) => decodeFlags(reply, count),
      shortfalls?.completes,
    );
  }

  function completeMany(requests: readonly CompleteRequest[]): Promise<boolean[]> {
    const count = requests.length;
    let checked: ReturnType<typeof retentionsOf>;
    try {
      checked = retentionsOf(requests);
    } catch (error) {
      return Promise.reject(error);
    }
    const { retentions } = checked;
    if (checked.unsafeTokens === 0) return sendCompletes(requests, retentions);
    // A token that is not a safe integer never matches a record: fenced out without asking Redis.
    const sent: number[] = [];
    for (let i = 0; i < count; i++) {
      if (Number.isSafeInteger((requests[i] as CompleteRequest).token)) sent.push(i);
    }
    // Each sent item's answer (or, in a partial rejection, its error) goes back to its own index.
    const spread = <T>(items: readonly T[]): Array<boolean | T> => {
      const results: Array<boolean | T> = requests.map(() => false);
      for (const [j, i] of sent.entries()) results[i] = items[j] as T;
      return results;
    };
    return sendCompletes(
      sent.map((i) => requests[i] as CompleteRequest),
      sent.map((i) => retentions[i] as number),
    ).then(
      (flags) => spread(flags.map((flag) => flag === true)) as boolean[],
      (error: unknown) => {
        const partial = partialResults(error);
        if (!Array.isArray(partial)) throw error;
        throw storeFailure('completeMany', new PartialBatchError(spread(partial as unknown[])));
      },
    );
  }

  /**
   * Both batches in one script call (`complete-claim-script.ts`), on a single node, when every completion
   * can be sent; otherwise, as on a Cluster, `completeMany` then `claimMany`.
   */
  function completeAndClaimMany(
    completes: readonly CompleteRequest[],
    claims: readonly ClaimRequest[],
  ): Promise<CompleteAndClaimResults> {
    const completeCount = completes.length;
    const claimCount = claims.length;
    // Both lists are checked before anything is sent, also on the path that sends them one after the other.
    let checked: ReturnType<typeof retentionsOf>;
    let durations: ClaimDurations;
    try {
      checked = retentionsOf(completes);
      durations = durationsOf(claims);
    } catch (error) {
      return Promise.reject(error);
    }
    if (cluster || checked.unsafeTokens > 0 || completeCount === 0 || claimCount === 0) {
      // Each batch's partial answer (an item refused, a completion short of its replicas) is kept, and
      // the claims are still sent: see completeThenClaim.
      return completeThenClaim(
        () => completeMany(completes),
        () => claimMany(claims),
        claimCount,
        (error) => (error instanceof Error ? error : new Error(String(error))),
      ).catch((error: unknown) => {
        if (!(error instanceof PartialBatchError)) throw error;
        throw storeFailure('completeAndClaimMany', error);
      });
    }
    const command = scriptCommand(scripts.completeClaimMany, completeCount + 2 * claimCount);
    pushRecordKeys(command, completes);
    pushRecordKeys(command, claims);
    pushStepsKeys(command, claims);
    // ARGV[1] and ARGV[2] (the split) are filled in once complete-many's arguments are counted.
    const split = command.length;
    command.push('', '');
    pushCompleteArgs(command, completes, checked.retentions);
    command[split] = String(completeCount);
    command[split + 1] = String(command.length - split - 2);
    pushClaimArgs(command, claims, durations);
    return write(
      'completeAndClaimMany',
      scripts.completeClaimMany,
      command,
      (reply) => decodeCompleteAndClaim(reply, completeCount, durations.leases, claims),
      shortfalls?.completesAndClaims,
    );
  }

  return { claimMany, completeMany, completeAndClaimMany };
}
