/**
 * Idempotency keys: validation, the hashed storage key, and derived downstream keys.
 *
 * Raw client keys never reach a store: the storage key is a fixed-length SHA-256 over
 * (namespace, scope, key), so one caller's key can never address another caller's record, and no
 * user-chosen bytes end up in a Redis key name or SQL value.
 * @module
 */
import { hash } from 'node:crypto';
import { InvalidKeyError } from './errors.js';

/** Longest accepted key, in characters (Stripe's limit, the IETF draft's recommendation). */
export const MAX_KEY_LENGTH = 255;

// Printable ASCII, space included: the set every HTTP header and broker header can carry unchanged.
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

/**
 * Check that `key` is 1–255 printable ASCII characters.
 * @throws InvalidKeyError naming what is wrong.
 */
export function validateKey(key: unknown): asserts key is string {
  if (typeof key !== 'string') throw new InvalidKeyError('must be a string');
  if (key.length === 0) throw new InvalidKeyError('must not be empty');
  if (key.length > MAX_KEY_LENGTH) {
    throw new InvalidKeyError(`must be at most ${MAX_KEY_LENGTH} characters, got ${key.length}`);
  }
  if (!PRINTABLE_ASCII.test(key)) {
    throw new InvalidKeyError('must contain only printable ASCII characters (0x20-0x7E)');
  }
}

/**
 * The storage key for (namespace, scope, key): 64 hex characters. The parts are length-delimited (a JSON
 * array) before hashing so that `('a:b', 'c')` and `('a', 'b:c')` can never collide.
 */
export function storageKey(namespace: string, scope: string, key: string): string {
  return hash('sha256', `${arrayPrefix(namespace, scope)}${JSON.stringify(key)}]`, 'hex');
}

/**
 * The storage key of a scope kept apart from the components' own (see `reserved-scopes.ts`): a SHA-256
 * over `[namespace, [source, scope], key]`. The scope's place holds an array, never a string or a number,
 * so no `(namespace, scope, key)` of {@link storageKey} can give the same bytes to hash.
 */
export function separatedStorageKey(
  namespace: string,
  source: string,
  scope: string,
  key: string,
): string {
  return hash('sha256', JSON.stringify([namespace, [source, scope], key]), 'hex');
}

// `JSON.stringify([namespace, scope, key])` is `["<namespace>","<scope>",` + the key's JSON + `]`. The
// prefix is remembered for the last (namespace, scope): an engine or a consumer uses one namespace and
// usually one scope, and this saves two of the three encodings on every run.
let lastNamespace: string | undefined;
let lastScope: string | undefined;
let lastPrefix = '';

function arrayPrefix(namespace: string, scope: string): string {
  if (namespace !== lastNamespace || scope !== lastScope) {
    lastPrefix = `[${JSON.stringify(namespace)},${JSON.stringify(scope)},`;
    lastNamespace = namespace;
    lastScope = scope;
  }
  return lastPrefix;
}

/**
 * A stable key derived from a storage key and a step name, to hand to a downstream provider (a payment API's
 * own idempotency key) so that a side effect outside the store's transaction deduplicates there too. The
 * same (storage key, step) always gives the same value, on every attempt and takeover.
 */
export function deriveDownstreamKey(storageKeyHex: string, step: string): string {
  const digest = hash('sha256', `${storageKeyHex}\0${step}`, 'hex');
  return `ik_${digest.slice(0, 40)}`;
}
