/**
 * The names of a record's Redis keys under the store's prefix: `<prefix>{<storage key>}` for the record,
 * `<prefix>{<storage key>}:s` for its steps. The storage key is the hash tag, so both keys of a record
 * live in one Cluster slot and a single-record script never spans two (no `CROSSSLOT`). What the values
 * hold is described in `redis-store.ts`; the `SCAN` pattern that matches the record keys is in `scan.ts`.
 * @module
 */
import type { RedisArg } from './client.js';

/** The key names of the records under one prefix. */
export interface RecordKeys {
  /** The key of the record stored under `key`: `<prefix>{<key>}`. */
  recordKey(key: string): string;
  /** The key of that record's steps hash: `<prefix>{<key>}:s`. */
  stepsKey(key: string): string;
  /** Append the record key of every item: a batch script's KEYS. */
  pushRecordKeys(command: RedisArg[], items: readonly { key: string }[]): void;
  /** Append the steps key of every item: the claim batch's KEYS after its record keys. */
  pushStepsKeys(command: RedisArg[], items: readonly { key: string }[]): void;
}

/** The key names of the records under `prefix` (a prefix `checkPrefix` accepted). */
export function recordKeys(prefix: string): RecordKeys {
  const recordKey = (key: string) => `${prefix}{${key}}`;
  // The record's steps: same hash tag, so the same Cluster slot as the record key.
  const stepsKey = (key: string) => `${prefix}{${key}}:s`;
  /** Append the record key of every item: a batch script's KEYS. */
  const pushRecordKeys = (command: RedisArg[], items: readonly { key: string }[]): void => {
    for (let i = 0; i < items.length; i++)
      command.push(recordKey((items[i] as { key: string }).key));
  };
  /** Append the steps key of every item: the claim batch's KEYS after its record keys. */
  const pushStepsKeys = (command: RedisArg[], items: readonly { key: string }[]): void => {
    for (let i = 0; i < items.length; i++)
      command.push(stepsKey((items[i] as { key: string }).key));
  };
  return { recordKey, stepsKey, pushRecordKeys, pushStepsKeys };
}
