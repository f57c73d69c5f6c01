/**
 * The durations of the Redis store's calls (leases, reservations, retentions), checked and rounded up to
 * the whole milliseconds Redis TTLs take, before anything is sent: a bad duration rejects the call, and a
 * batch (one call, applied whole) is checked item by item first.
 * @module
 */

import { assertPositiveMs, assertReserveMs } from '../store/durations.js';
import type { ClaimRequest, CompleteRequest } from '../store/store.js';

/**
 * A lease or a retention in whole ms. Redis TTLs are whole milliseconds and must be positive.
 * @throws InvalidOptionsError unless `value` is a positive number of ms (at most 100 years).
 */
export function wholeMs(value: number, name: string): number {
  assertPositiveMs(value, name, 'redisStore');
  return Math.ceil(value);
}

/**
 * A claim's reservation in whole ms: absent is 0 (none); a value not above the lease reserves nothing.
 * @throws InvalidOptionsError unless `value` is a non-negative number of ms (at most 100 years).
 */
export function reserveOf(value: number | undefined): number {
  if (value === undefined) return 0;
  assertReserveMs(value, 'redisStore');
  return Math.ceil(value);
}

/** A batch's claims' durations in whole ms: `leases[i]` and `reserves[i]` for item `i`. */
export interface ClaimDurations {
  leases: number[];
  reserves: number[];
}

/**
 * Every claim's lease and reservation in whole ms, checked before anything is sent (a batch is one call,
 * applied whole).
 */
export function durationsOf(requests: readonly ClaimRequest[]): ClaimDurations {
  const leases: number[] = [];
  const reserves: number[] = [];
  for (let i = 0; i < requests.length; i++) {
    const request = requests[i] as ClaimRequest;
    leases.push(wholeMs(request.leaseMs, 'leaseMs'));
    reserves.push(reserveOf(request.reserveMs));
  }
  return { leases, reserves };
}

/**
 * Every completion's retention in whole ms, checked before anything is sent, and how many tokens are not
 * safe integers (such a token never matches a record: fenced out without asking Redis).
 */
export function retentionsOf(requests: readonly CompleteRequest[]): {
  retentions: number[];
  unsafeTokens: number;
} {
  const retentions: number[] = [];
  let unsafeTokens = 0;
  for (let i = 0; i < requests.length; i++) {
    const request = requests[i] as CompleteRequest;
    retentions.push(wholeMs(request.retentionMs, 'retentionMs'));
    if (!Number.isSafeInteger(request.token)) unsafeTokens++;
  }
  return { retentions, unsafeTokens };
}
