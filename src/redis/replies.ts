/**
 * Decoding of record values and script replies into the core's record types. Bulk strings arrive as
 * `Buffer`s (see `client.ts`), so outcomes stay byte-exact; integers arrive as numbers.
 *
 * A record is one string value (see `redis-store.ts`):
 * `p|<token>|<leaseUntil>|<createdAt>|<attempt>|<fingerprint>` while in progress,
 * `c|<token>|<completedAt>|<expiresAt>|<fingerprint byte length>|<fingerprint><outcome bytes>` once
 * completed, and `r|<token>` for the tombstone a release leaves (not a record). Steps come back from
 * load-steps-2.lua as a flat array of names and results.
 * @module
 */
import { StoreUnavailableError } from '../core/errors.js';
import { type ClaimResult, type IdempotencyRecord, RecordStatus } from '../core/record.js';
import { comparableFingerprint } from '../core/stored-fingerprint.js';
import { PartialBatchError } from '../store/partial-batch.js';
import type { CompleteAndClaimResults, RecordInspection } from '../store/store.js';

const BAR = 0x7c; // '|'
const ZERO = 0x30;
const IN_PROGRESS = 0x70; // 'p'
const COMPLETED = 0x63; // 'c'
const TOMBSTONE = 0x72; // 'r'

/** A reply element as text (UTF-8), whatever type the client decoded it to. */
export function replyText(value: unknown): string {
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  throw new Error(`unexpected Redis reply element: ${typeof value}`);
}

/** A reply element as a safe integer. */
export function replyNumber(value: unknown): number {
  const number = typeof value === 'number' ? value : Number(replyText(value));
  if (!Number.isSafeInteger(number)) throw new Error(`unexpected Redis number: ${String(value)}`);
  return number;
}

function replyBuffer(value: unknown): Buffer {
  if (Buffer.isBuffer(value)) return value;
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  throw new Error(`unexpected Redis reply for a record: ${typeof value}`);
}

/** Reads `|`-separated decimal fields of a value, left to right, without allocating strings. */
class FieldReader {
  position = 2; // after the status byte and its '|'
  constructor(private readonly value: Buffer) {}

  /** The next field as a non-negative safe integer; consumes its trailing '|' (or the end). */
  number(): number {
    const { value } = this;
    let result = 0;
    let digits = 0;
    while (this.position < value.length && value[this.position] !== BAR) {
      const digit = (value[this.position] as number) - ZERO;
      if (digit < 0 || digit > 9) break;
      result = result * 10 + digit;
      digits++;
      this.position++;
    }
    const atEnd = this.position === value.length;
    if (digits === 0 || (!atEnd && value[this.position] !== BAR) || !Number.isSafeInteger(result)) {
      throw new Error(`malformed Redis record value: ${value.subarray(0, 64).toString('latin1')}`);
    }
    if (!atEnd) this.position++;
    return result;
  }
}

/**
 * Decode a record value; `undefined` for a tombstone. Outcome bytes are copied out of the client's read
 * buffer, so a stored outcome never changes under the caller.
 */
export function decodeValue(reply: unknown): IdempotencyRecord | undefined {
  const value = replyBuffer(reply);
  const status = value[0];
  const fields = new FieldReader(value);
  if (value[1] !== BAR) throw new Error('malformed Redis record value: no status');
  if (status === IN_PROGRESS) {
    const token = fields.number();
    const leaseUntil = fields.number();
    const createdAt = fields.number();
    const attempt = fields.number();
    return {
      status: RecordStatus.InProgress,
      fingerprint: value.toString('utf8', fields.position),
      token,
      leaseUntil,
      attempt,
      createdAt,
    };
  }
  if (status === COMPLETED) {
    const token = fields.number();
    const completedAt = fields.number();
    const expiresAt = fields.number();
    const fingerprintLength = fields.number();
    const outcomeStart = fields.position + fingerprintLength;
    if (outcomeStart > value.length) throw new Error('malformed Redis record value: short');
    return {
      status: RecordStatus.Completed,
      fingerprint: value.toString('utf8', fields.position, outcomeStart),
      token,
      outcome: new Uint8Array(value.subarray(outcomeStart)),
      completedAt,
      expiresAt,
    };
  }
  if (status === TOMBSTONE) return undefined;
  throw new Error(`unexpected record status in Redis value: ${value.toString('latin1', 0, 1)}`);
}

/**
 * Decode one claim reply (claim-2.lua, or one item of claim-many-n.lua). `leaseMs` is the lease the claim
 * asked for, in whole ms: on the hot path the script returns only the token, and the lease end is the
 * token's millisecond + `leaseMs`. A blocking record that holds the stored form of the claim's
 * `fingerprint` (its digest, for one with a lone surrogate) carries `fingerprint` itself, so that the
 * engine finds the same request.
 */
export function decodeClaim(reply: unknown, leaseMs: number, fingerprint: string): ClaimResult {
  if (typeof reply === 'number') {
    const token = replyNumber(reply);
    return { claimed: true, token, attempt: 1, leaseUntil: Math.floor(token / 1000) + leaseMs };
  }
  if (Array.isArray(reply)) {
    return {
      claimed: true,
      token: replyNumber(reply[0]),
      attempt: replyNumber(reply[1]),
      leaseUntil: replyNumber(reply[2]),
    };
  }
  if (Buffer.isBuffer(reply) || typeof reply === 'string') {
    const record = decodeValue(reply);
    if (record === undefined)
      throw new Error('unexpected Redis reply: a claim was blocked by a tombstone');
    record.fingerprint = comparableFingerprint(record.fingerprint, fingerprint);
    return { claimed: false, record };
  }
  throw new Error(`unexpected Redis reply: ${typeof reply}`);
}

function expectBatch(reply: unknown, count: number): asserts reply is unknown[] {
  if (!Array.isArray(reply) || reply.length !== count) {
    throw new Error(`unexpected Redis reply: expected ${count} results`);
  }
}

/**
 * The error of a batch item the script could not apply (`{'error', message}`, see claim-many-n.lua), or
 * `undefined` for any other reply. A claimed item's table starts with a number, so the usual reply costs
 * one `typeof`.
 */
function itemError(reply: unknown): StoreUnavailableError | undefined {
  if (!Array.isArray(reply) || reply.length !== 2 || typeof reply[0] === 'number') return undefined;
  if (replyText(reply[0]) !== 'error') return undefined;
  return new StoreUnavailableError(`Redis store: a batch item failed: ${replyText(reply[1])}`);
}

/** Decode a batch script's items with `one`, keeping a failed item's error in its place. */
function decodeItems<T>(
  reply: unknown,
  count: number,
  one: (item: unknown, index: number) => T,
): { results: Array<T | StoreUnavailableError>; failed: number } {
  expectBatch(reply, count);
  const results: Array<T | StoreUnavailableError> = [];
  let failed = 0;
  for (let i = 0; i < count; i++) {
    const item: unknown = reply[i];
    const error = itemError(item);
    if (error === undefined) results.push(one(item, i));
    else {
      results.push(error);
      failed++;
    }
  }
  return { results, failed };
}

/** The fingerprint of each claim of a batch, as {@link decodeClaim} takes it. */
export type ClaimFingerprints = ReadonlyArray<{ readonly fingerprint: string }>;

/**
 * Decode claim-many-n.lua's reply: one claim per item, item `i` having asked for `leases[i]` ms with
 * `claims[i].fingerprint`.
 * @throws PartialBatchError with every item's result or error when an item failed (the other items were
 *   applied: their callers must get their results).
 */
export function decodeClaims(
  reply: unknown,
  leases: readonly number[],
  claims: ClaimFingerprints,
): ClaimResult[] {
  const { results, failed } = decodeItems(reply, leases.length, (item, i) =>
    decodeClaim(item, leases[i] as number, (claims[i] as { fingerprint: string }).fingerprint),
  );
  if (failed > 0) throw new PartialBatchError(results);
  return results as ClaimResult[];
}

/**
 * Decode complete-many-n.lua's reply: one `1` / `0` per item.
 * @throws PartialBatchError as {@link decodeClaims} does.
 */
export function decodeFlags(reply: unknown, count: number): boolean[] {
  const { results, failed } = decodeItems(reply, count, decodeFlag);
  if (failed > 0) throw new PartialBatchError(results);
  return results as boolean[];
}

/**
 * Decode the combined script's reply (`complete-claim-script.ts`): complete-many's flags for `completeCount`
 * items, then claim-many's claims, item `i` having asked for `leases[i]` ms with `claims[i].fingerprint`.
 * @throws PartialBatchError (results `{ completed, claimed }`) as {@link decodeClaims} does.
 */
export function decodeCompleteAndClaim(
  reply: unknown,
  completeCount: number,
  leases: readonly number[],
  claims: ClaimFingerprints,
): CompleteAndClaimResults {
  expectBatch(reply, 2);
  const completed = decodeItems(reply[0], completeCount, decodeFlag);
  const claimed = decodeItems(reply[1], leases.length, (item, i) =>
    decodeClaim(item, leases[i] as number, (claims[i] as { fingerprint: string }).fingerprint),
  );
  const failed = completed.failed + claimed.failed;
  const results = { completed: completed.results, claimed: claimed.results };
  if (failed > 0) throw new PartialBatchError(results);
  return results as CompleteAndClaimResults;
}

/** Decode get-1.lua's reply: the live record's value, or nil. */
export function decodeGet(reply: unknown): IdempotencyRecord | undefined {
  return reply === null || reply === undefined ? undefined : decodeValue(reply);
}

/**
 * Decode load-steps-2.lua's reply: nil when the token does not hold the key, else a flat array of step
 * names and results. Results are copied out of the client's read buffer, as outcomes are. The object is
 * built with `Object.fromEntries`, so every name (`__proto__` is a valid step name) is an own property.
 */
export function decodeSteps(reply: unknown): Record<string, Uint8Array> | undefined {
  if (reply === null || reply === undefined) return undefined;
  if (!Array.isArray(reply) || reply.length % 2 !== 0) {
    throw new Error('unexpected Redis reply: expected step names and results');
  }
  const entries: Array<[string, Uint8Array]> = [];
  for (let i = 0; i < reply.length; i += 2) {
    entries.push([replyText(reply[i]), new Uint8Array(replyBuffer(reply[i + 1]))]);
  }
  return Object.fromEntries(entries);
}

/**
 * Decode inspect-2.lua's reply: nil, or the value, the key's expiry, Redis's clock and the steps. The key's
 * expiry past an in-progress record's lease end is its reservation (see claim-2.lua).
 */
export function decodeInspection(reply: unknown): RecordInspection | undefined {
  if (reply === null || reply === undefined) return undefined;
  if (!Array.isArray(reply) || reply.length !== 4) {
    throw new Error('unexpected Redis reply: expected a value, an expiry, a time and steps');
  }
  const record = decodeValue(reply[0]);
  if (record === undefined) return undefined;
  const keyExpiresAt = replyNumber(reply[1]);
  if (record.status === RecordStatus.InProgress) {
    if (keyExpiresAt > record.leaseUntil) record.reservedUntil = keyExpiresAt;
    const steps = decodeSteps(reply[3]) ?? {};
    if (Object.keys(steps).length > 0) record.steps = steps;
  }
  return { record, now: replyNumber(reply[2]) };
}

/** Decode a compare-and-set script's `1` / `0`. */
export function decodeFlag(reply: unknown): boolean {
  return replyNumber(reply) === 1;
}

/** The header fields `stats()` needs, from the first bytes of a value (`GETRANGE`). */
export interface ValueHeader {
  /** `in_progress` or `completed` (a tombstone has no header). */
  status: RecordStatus;
  /** Lease end (in progress) or expiry (completed), epoch ms. */
  liveUntil: number;
  /** Creation time (in progress) or completion time (completed), epoch ms. */
  since: number;
}

/** Decode the start of a value (at least up to its fourth `|`); `undefined` for a tombstone. */
export function decodeHeader(reply: unknown): ValueHeader | undefined {
  const value = replyBuffer(reply);
  const fields = new FieldReader(value);
  if (value[0] === IN_PROGRESS) {
    fields.number();
    const liveUntil = fields.number();
    return { status: RecordStatus.InProgress, liveUntil, since: fields.number() };
  }
  if (value[0] === COMPLETED) {
    fields.number();
    const since = fields.number();
    return { status: RecordStatus.Completed, liveUntil: fields.number(), since };
  }
  return undefined;
}
