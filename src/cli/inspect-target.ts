/**
 * Which record `idempotency-kit inspect` reads: a storage key as given (from a trace's
 * `idempotency.key_hash`, a hook event, a log line), or one derived from the client's own key with the
 * engine's namespace and the request's scope (`--key`, `--namespace`, `--scope`), as the engine derives it.
 * The question "was my request with key K executed?" starts from the client's key. `--http` says the scope
 * is an HTTP route's: one that starts `consumer:`, `handed-back:` or `dead-letter:` is then keyed apart from
 * those components' records, as the HTTP adapters key it (see core/reserved-scopes.ts).
 * @module
 */
import { InvalidKeyError } from '../core/errors.js';
import { validateKey } from '../core/key.js';
import { ScopeSource, sourcedStorageKey } from '../core/reserved-scopes.js';
import { UsageError } from './parse-errors.js';

/** A storage key: the lowercase hex SHA-256 every store keeps a record under. */
const STORAGE_KEY = /^[0-9a-f]{64}$/;

/** The record `inspect` reads, and how it was named. */
export interface InspectTarget {
  /** The storage key to read. */
  storageKey: string;
  /**
   * Present when the storage key was derived from a client key: the namespace and scope it was derived
   * with (an absent record then means "not under this namespace and scope", worth saying), and `http`
   * when it was derived as an HTTP route's scope (`--http`).
   */
  derived?: { namespace: string; scope: string; http?: true };
}

/** The options of `inspect` that name its record, as parsed. */
export interface InspectOptions {
  key?: string | undefined;
  namespace?: string | undefined;
  scope?: string | undefined;
  /** `--http`: the scope is an HTTP route's. */
  http?: true | undefined;
}

/**
 * The record `inspect` reads: the positional storage key, or the one `--key` (with `--namespace`, default
 * `default`, `--scope`, default empty, and `--http`) derives.
 * @throws UsageError for both or neither, a positional that is not a storage key, a `--key` the engine
 *   would refuse, or `--namespace`, `--scope` or `--http` without `--key`.
 */
export function inspectTarget(
  positional: string | undefined,
  options: InspectOptions,
): InspectTarget {
  const { key, namespace, scope, http } = options;
  if (key === undefined) {
    if (namespace !== undefined || scope !== undefined) {
      throw new UsageError('--namespace and --scope apply with --key only');
    }
    // A storage key is read as given: there is nothing to derive differently.
    if (http !== undefined) throw new UsageError('--http applies with --key only');
    if (positional === undefined || positional === '') {
      throw new UsageError(
        'inspect needs the storage key to show (idempotency-kit inspect <key>), or a client key with --key',
      );
    }
    // A client's key ('order-42') would be looked up as is and found absent, whatever its state.
    if (!STORAGE_KEY.test(positional)) {
      throw new UsageError(
        `inspect takes a storage key, not ${JSON.stringify(positional)}: the 64 lowercase hex digits (SHA-256 of ` +
          "namespace, scope and key) a record is stored under. Take it from a trace's idempotency.key_hash " +
          "or a hook event's storageKey, or compute it in code with idempotency.storageKeyFor(key, scope); " +
          "or give the client's own key as --key, with the engine's --namespace and the request's --scope",
      );
    }
    return { storageKey: positional };
  }
  if (positional !== undefined) {
    throw new UsageError('give inspect a storage key or --key, not both');
  }
  try {
    validateKey(key);
  } catch (error) {
    if (!(error instanceof InvalidKeyError)) throw error;
    // The engine refuses such a key before anything is stored: no record can have it.
    throw new UsageError(`--key ${error.reason}`);
  }
  const derived: NonNullable<InspectTarget['derived']> = {
    namespace: namespace ?? 'default',
    scope: scope ?? '',
  };
  if (http === true) derived.http = true;
  const source = http === true ? ScopeSource.Http : undefined;
  return {
    storageKey: sourcedStorageKey(derived.namespace, derived.scope, key, source),
    derived,
  };
}
