/**
 * The storage key an operator's or a caller's lookup derives (`storageKeyFor`, `inspect`): the key `run`
 * used for (namespace, scope, key), with the scope taken from where the caller says it came from. An HTTP
 * route's scope under a reserved prefix is keyed apart from the components' own (reserved-scopes.ts), so a
 * lookup must know which it is to find the record.
 * @module
 */
import { InvalidOptionsError } from './errors.js';
import { validateKey } from './key.js';
import { booleanOption, knownFields, scopeOption, shownValue } from './option-checks.js';
import { ScopeSource, sourcedStorageKey } from './reserved-scopes.js';

/** Where the scope given to `storageKeyFor` or `inspect` came from. */
export interface StorageKeyOptions {
  /**
   * The scope is an HTTP route's (its `scope` function's answer, or the credentials' digest): derive the
   * key as the HTTP adapters do, which key a scope starting `consumer:`, `handed-back:` or `dead-letter:`
   * apart from the consumers' own records (see docs/http.md, "Scope"). Any other scope gives the same
   * key either way. @default false: the scope is a consumer's or a `run()` caller's
   */
  http?: boolean;
}

// Every key of StorageKeyOptions, checked by the compiler both ways.
const STORAGE_KEY_FIELDS = Object.keys({ http: true } as const satisfies Record<
  keyof StorageKeyOptions,
  true
>);

/** The storage key `run` uses for (scope, key), the scope from where `options` says. */
export function lookupKey(
  namespace: string,
  key: string,
  scope: string,
  options: StorageKeyOptions | undefined,
  caller: string,
): string {
  validateKey(key);
  let http = false;
  // `null` as absent, as for the engine's other options; a string or number would list its characters.
  if (options !== undefined && options !== null) {
    if (typeof options !== 'object') {
      throw new InvalidOptionsError(
        `${caller}: expected options { http }, got ${shownValue(options)}`,
      );
    }
    knownFields(options, caller, STORAGE_KEY_FIELDS);
    http = booleanOption(options.http, `${caller}: http`);
  }
  return sourcedStorageKey(namespace, scopeOption(scope), key, http ? ScopeSource.Http : undefined);
}
