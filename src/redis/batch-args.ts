/**
 * The arguments (`ARGV`) of the Redis store's batch scripts, `claim-many-n.lua` and
 * `complete-many-n.lua` (and of the script that runs both, `complete-claim-script.ts`), appended to a
 * command built by `scriptCommand`. What every item of a batch shares is sent once, since a batch of one
 * engine almost always shares its lease and retention.
 * @module
 */
import { utf8StoredFingerprint } from '../core/stored-fingerprint.js';
import type { ClaimRequest, CompleteRequest } from '../store/store.js';
import type { ClaimDurations } from './call-durations.js';
import type { RedisArg } from './client.js';
import { outcomeArg } from './outcome-arg.js';

/**
 * Append a batch's per-item durations (retentions) to a script command: once when every item has the
 * same (the usual case: one engine, one retention), else one per item. The batch scripts tell the two
 * apart by their argument count.
 */
function pushOnceOrEach(command: RedisArg[], values: readonly number[]): void {
  let same = true;
  for (let i = 1; i < values.length && same; i++) same = values[i] === values[0];
  if (same) command.push(String(values[0]));
  else for (const value of values) command.push(String(value));
}

/**
 * claim-many-n.lua's arguments: the fingerprints (in their stored form), then (lease, reservation) pairs:
 * one pair when every item has the same (the usual case: one engine, one lease, one retention), else one
 * pair per item. The script tells the two apart by the argument count (n + 2 against 3n, the same layout
 * when n = 1).
 */
export function pushClaimArgs(
  command: RedisArg[],
  requests: readonly ClaimRequest[],
  { leases, reserves }: ClaimDurations,
): void {
  const count = requests.length;
  for (let i = 0; i < count; i++) {
    command.push(utf8StoredFingerprint((requests[i] as ClaimRequest).fingerprint));
  }
  let same = true;
  for (let i = 1; i < count && same; i++) {
    same = leases[i] === leases[0] && reserves[i] === reserves[0];
  }
  if (same) {
    command.push(String(leases[0]), String(reserves[0]));
  } else {
    for (let i = 0; i < count; i++) command.push(String(leases[i]), String(reserves[i]));
  }
}

/** complete-many-n.lua's arguments: token and outcome per item, then the retentions. */
export function pushCompleteArgs(
  command: RedisArg[],
  items: readonly CompleteRequest[],
  retentions: readonly number[],
): void {
  for (let i = 0; i < items.length; i++) {
    const item = items[i] as CompleteRequest;
    command.push(String(item.token), outcomeArg(item.outcome));
  }
  pushOnceOrEach(command, retentions);
}
