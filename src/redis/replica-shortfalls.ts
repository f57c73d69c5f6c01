/**
 * What each write call of the Redis store does when the `WAIT` behind it (`waitForReplicas`) answered
 * fewer replicas than asked: one handler per kind of call, built once per store, that the store's single
 * write path (`write-path.ts`) calls only then. A won claim and an extension are refused (nothing
 * may run on a write a failover could lose); a completion, a release and a step's result are applied, and
 * told apart as unconfirmed with a `ReplicationShortError` that the engine reports. See
 * docs/stores/redis.md, "Waiting for replicas".
 * @module
 */
import type { ClaimResult } from '../core/record.js';
import { PartialBatchError } from '../store/partial-batch.js';
import type { CompleteAndClaimResults } from '../store/store.js';
import type { RedisArg } from './client.js';
import {
  type Acknowledged,
  markShortItems,
  type ReplicaWait,
  replicasShortError,
  replicasShortReason,
  replicationShortError,
} from './replica-wait.js';

/**
 * A call's answer once its `WAIT` fell short: from the `WAIT`'s answer (the call's reply in it), the
 * call's own decoder and its command (`EVALSHA <sha> <numkeys> <keys…> <args…>`, whose keys tell which
 * records it wrote), the answer to give, or the refusal to throw.
 */
export type OnShort<T> = (
  acknowledged: Acknowledged,
  decode: (reply: unknown) => T,
  command: readonly RedisArg[],
) => T;

/** The handler of each kind of write call. */
export interface ShortfallHandlers {
  /** A single claim: refused if it won (a fresh one released). */
  claim: OnShort<ClaimResult>;
  /** `claimMany`: each won claim refused, the other items kept. */
  claims: OnShort<ClaimResult[]>;
  /** `extend`: refused if it held. */
  extend: OnShort<boolean>;
  /** A single completion: applied, and told apart as unconfirmed. */
  complete: OnShort<boolean>;
  /** `completeMany`: each applied completion told apart as unconfirmed. */
  completes: OnShort<boolean[]>;
  /** `completeAndClaimMany`: the completions as `completes`, the claims as `claims`. */
  completesAndClaims: OnShort<CompleteAndClaimResults>;
  /** A release: applied, and told apart as unconfirmed. */
  release: OnShort<boolean>;
  /** A step's result: applied, and told apart as unconfirmed. */
  saveStep: OnShort<boolean>;
}

/**
 * A batch reply's items, an `Error` in place of each item that failed (a {@link PartialBatchError}'s
 * results), from `decode`, which throws that error when an item failed.
 */
export function itemsOf<R>(decode: () => R): R {
  try {
    return decode();
  } catch (error) {
    if (error instanceof PartialBatchError) return error.results as R;
    throw error;
  }
}

/**
 * The handlers for a store waiting for `wait`.
 * @param releaseRefused - releases a refused claim, best effort, given its record key (see the store's
 *   `releaseRefused` for which claims it releases and why).
 */
export function shortfallHandlers(
  wait: ReplicaWait,
  releaseRefused: (recordKey: string, result: ClaimResult) => void,
): ShortfallHandlers {
  /**
   * A batch's claims, whose record keys start at `command[firstKey]`: each won claim replaced by its
   * refusal, the other items kept (a replay, a conflict or a mismatch runs nothing). Returns how many
   * items are errors now.
   */
  const refuseWonClaims = (
    command: readonly RedisArg[],
    firstKey: number,
    items: Array<ClaimResult | Error>,
    acknowledged: Acknowledged,
  ): number => {
    let failed = 0;
    for (let i = 0; i < items.length; i++) {
      const item = items[i] as ClaimResult | Error;
      if (item instanceof Error) failed++;
      else if (item.claimed) {
        releaseRefused(command[firstKey + i] as string, item);
        items[i] = replicasShortError('claim', acknowledged, wait);
        failed++;
      }
    }
    return failed;
  };

  // Applied whatever the count: the handler (or the step) has run, and failing the write could not undo
  // it. The engine takes the error's `result` as the answer and reports the shortfall.
  const applied =
    (operation: string): OnShort<boolean> =>
    (acknowledged, decode) => {
      const flag = decode(acknowledged.reply);
      if (flag) throw replicationShortError(operation, acknowledged, wait, flag);
      return flag;
    };

  return {
    // The guard makes a thrown reason the caller's StoreUnavailableError: no handler runs on the claim.
    claim: (acknowledged, decode, command) => {
      const result = decode(acknowledged.reply);
      if (result.claimed) {
        releaseRefused(command[3] as string, result);
        throw replicasShortReason(acknowledged, wait);
      }
      return result;
    },
    claims: (acknowledged, decode, command) => {
      const items: Array<ClaimResult | Error> = itemsOf(() => decode(acknowledged.reply));
      const failed = refuseWonClaims(command, 3, items, acknowledged);
      if (failed > 0) throw new PartialBatchError(items);
      return items as ClaimResult[];
    },
    // An extension a failover could lose would end the lease sooner than its holder counts on: the engine
    // treats a refused one as failed, and stops the handler if none succeeds in time.
    extend: (acknowledged, decode) => {
      const held = decode(acknowledged.reply);
      if (held) throw replicasShortReason(acknowledged, wait);
      return held;
    },
    complete: applied('complete'),
    completes: (acknowledged, decode) => {
      const items: Array<boolean | Error> = itemsOf(() => decode(acknowledged.reply));
      const errors = markShortItems('complete', items, acknowledged, wait);
      if (errors > 0) throw new PartialBatchError(items);
      return items as boolean[];
    },
    completesAndClaims: (acknowledged, decode, command) => {
      const results: { completed: Array<boolean | Error>; claimed: Array<ClaimResult | Error> } =
        itemsOf(() => decode(acknowledged.reply));
      // The claims' record keys follow the completions'. Errors, not failures: an applied completion is
      // one too (unconfirmed), which PartialBatchError counts apart.
      let errors = refuseWonClaims(
        command,
        3 + results.completed.length,
        results.claimed,
        acknowledged,
      );
      errors += markShortItems('complete', results.completed, acknowledged, wait);
      if (errors > 0) throw new PartialBatchError(results);
      return results as CompleteAndClaimResults;
    },
    // A lost release only keeps the key until the lease ends; reported all the same.
    release: applied('release'),
    saveStep: applied('saveStep'),
  };
}
