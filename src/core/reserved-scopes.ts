/**
 * The scopes the library's own components keep their records under, and how a scope that comes from
 * outside the library (an HTTP route's `scope` function) is kept apart from them.
 *
 * Why: every component writes into one store, namespace and key space (a storage key is
 * `hash(namespace, scope, key)`), and an HTTP route's `scope` function may return anything: a tenant's
 * name, a header's value the caller chose. Returning `consumer:orders` used to address consumer `orders`'
 * records: the worker then skipped a message whose id was a request's key as a duplicate, and the request
 * met the worker's record (a 422, or its outcome replayed).
 *
 * How, without moving anyone's records: a scope from outside that starts with a reserved prefix is hashed
 * in another shape, `[namespace, [source, scope], key]` instead of `[namespace, scope, key]`. Its JSON has
 * `[` where every string scope has `"` (and a number scope a digit or `-`), so it equals no storage key
 * of the other shape, whatever the strings. Every other scope, and every component's own, keeps the
 * derivation it always had: only the records that collided move.
 * @module
 */
import { separatedStorageKey, storageKey } from './key.js';
import { scopeOption } from './option-checks.js';

/**
 * The prefix of each component's own scopes. A component that stores records under a scope of its own
 * builds it from a prefix listed here, and no HTTP scope can then equal it.
 */
export const ReservedScopePrefix = {
  /** A consumer's records of its messages: `consumer:<name>`. */
  Consumer: 'consumer:',
  /** A consumer's records of deliveries handed back without running: `handed-back:<name>`. */
  HandedBack: 'handed-back:',
  /** A consumer's records of dead letters not yet written: `dead-letter:<name>`. */
  DeadLetter: 'dead-letter:',
} as const;

/** Every reserved prefix, for the check below. */
export const RESERVED_SCOPE_PREFIXES: readonly string[] = Object.values(ReservedScopePrefix);

/** True when `scope` is a string starting with one of {@link RESERVED_SCOPE_PREFIXES}. */
export function isReservedScope(scope: unknown): boolean {
  if (typeof scope !== 'string') return false;
  for (const prefix of RESERVED_SCOPE_PREFIXES) if (scope.startsWith(prefix)) return true;
  return false;
}

/** Where a scope from outside the library comes from, as {@link SCOPE_SOURCE} names it. */
export const ScopeSource = {
  /** An HTTP route's scope (its `scope` function, or the credentials' digest). */
  Http: 'http',
} as const;

/**
 * Set on a run request (the engine's, a transactional mode's) whose scope came from outside the library;
 * its value names where ({@link ScopeSource}). A symbol, registered so that two copies of the package agree: no
 * public option, and no string field a caller could set by accident.
 */
export const SCOPE_SOURCE: unique symbol = Symbol.for('idempotency-kit.scope-source');

/** A run request that may carry {@link SCOPE_SOURCE}. */
export interface ScopeSourced {
  [SCOPE_SOURCE]?: string;
}

/**
 * The storage key a run request addresses: `storageKey(namespace, scope, key)`, or, for a scope from
 * outside ({@link SCOPE_SOURCE}) that starts with a reserved prefix, the separated shape.
 * @throws InvalidOptionsError for a scope that is neither a string nor a number (see `scopeOption`).
 */
export function runStorageKey(
  namespace: string,
  request: { key: string; scope?: unknown } & ScopeSourced,
): string {
  return sourcedStorageKey(
    namespace,
    scopeOption(request.scope),
    request.key,
    request[SCOPE_SOURCE],
  );
}

/**
 * The storage key of (namespace, scope, key) for a scope that came from `source` (`undefined`: the
 * library's own, or a `run()` caller's): the separated shape for a reserved-looking scope from outside,
 * else the plain one. For whoever derives a key to look a record up (`storageKeyFor`, `inspect`, the CLI's
 * `inspect --key --http`), so that it finds the record where the run put it.
 */
export function sourcedStorageKey(
  namespace: string,
  scope: string,
  key: string,
  source: string | undefined,
): string {
  return source !== undefined && isReservedScope(scope)
    ? separatedStorageKey(namespace, source, scope, key)
    : storageKey(namespace, scope, key);
}
