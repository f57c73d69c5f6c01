/**
 * Checks of option values that arrive untyped (from a config file, the environment, JavaScript callers):
 * checked, not coerced, because a coerced option fails the wrong way (`failOpen: 'false'` is truthy and
 * would run handlers unprotected during an outage; `storeErrors: 'false'` would store every error).
 * @module
 */
import { type Duration, MAX_DURATION_MS, toMs } from './duration.js';
import { InvalidOptionsError } from './errors.js';
import type { OutcomeCodec } from './outcome.js';

// JSON.stringify gives `undefined` for a function or a symbol, and throws for a BigInt or a cycle.
function shown(value: unknown): string {
  if (typeof value === 'function') return 'a function';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return typeof value;
  }
}

/**
 * `value` as an error message shows it, its type visible: JSON (as the checks here show values), so the
 * string `"5"` is told apart from the number `5`, which "got 5" would hide; but a number as JavaScript
 * writes it, since JSON shows `NaN` and `Infinity` as `null`.
 */
export function shownValue(value: unknown): string {
  return typeof value === 'number' ? String(value) : shown(value);
}

// `null` is "not given", as `??` always treated it: a JSON config writes null for an option it leaves out.
const absent = (value: unknown): value is null | undefined => value === undefined || value === null;

/**
 * `value` when it is a boolean, `fallback` when it is absent (`undefined` or `null`); else an
 * {@link InvalidOptionsError}.
 */
export function booleanOption(value: unknown, name: string, fallback = false): boolean {
  if (absent(value)) return fallback;
  if (typeof value !== 'boolean') {
    throw new InvalidOptionsError(`${name}: expected true or false, got ${shown(value)}`);
  }
  return value;
}

/** A `storeErrors` policy: a boolean or a function of the thrown error; `fallback` when absent. */
export function storeErrorsOption<P extends boolean | ((error: unknown) => boolean)>(
  value: P | undefined,
  name: string,
  fallback: P,
): P {
  if (absent(value)) return fallback;
  if (typeof value === 'boolean' || typeof value === 'function') return value;
  throw new InvalidOptionsError(
    `${name}: expected true, false or a function of the error, got ${shown(value)}`,
  );
}

/** A codec: an object with `encode` and `decode` functions; `fallback` when absent. */
export function codecOption(
  value: OutcomeCodec | undefined,
  name: string,
  fallback: OutcomeCodec,
): OutcomeCodec {
  if (absent(value)) return fallback;
  const codec = value as Partial<OutcomeCodec> | null;
  if (
    typeof codec !== 'object' ||
    codec === null ||
    typeof codec.encode !== 'function' ||
    typeof codec.decode !== 'function'
  ) {
    throw new InvalidOptionsError(
      `${name}: expected an object with encode and decode functions, got ${shown(value)}`,
    );
  }
  return value;
}

/**
 * A string; `fallback` when absent. The empty string is one: a namespace of `''` keys records as well as
 * any other, and refusing it would push a deployment that used it to another namespace, orphaning every
 * retained outcome (their retries would run again).
 */
export function stringOption(value: unknown, name: string, fallback: string): string {
  if (absent(value)) return fallback;
  if (typeof value !== 'string') {
    throw new InvalidOptionsError(`${name}: expected a string, got ${shown(value)}`);
  }
  return value;
}

// What a refused scope is, never its content: a scope function's result is often the authenticated user,
// and the message reaches logs and, through a framework's default error handler, the response body.
function kindOf(value: unknown): string {
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'object' && value !== null) {
    const name = Object.getPrototypeOf(value)?.constructor?.name;
    return typeof name === 'string' && name !== '' && name !== 'Object'
      ? `an object (${name})`
      : 'an object';
  }
  return typeof value === 'number' ? String(value) : typeof value;
}

/**
 * The scope of a run: a string, `''` when absent. A finite number is taken as it always was (its storage
 * keys stay the same); any other value is refused, because it would be keyed by its JSON: every object of
 * a class with private fields is `{}`, so every caller would share one scope and be replayed another's
 * outcome.
 */
export function scopeOption(value: unknown): string {
  if (typeof value === 'string') return value;
  if (absent(value)) return '';
  if (typeof value === 'number' && Number.isFinite(value)) return value as unknown as string;
  throw new InvalidOptionsError(`scope: expected a string, got ${kindOf(value)}`);
}

/**
 * A count (deliveries, concurrency, a batch size): a positive safe integer, `fallback` when absent; else an
 * {@link InvalidOptionsError} showing the value as {@link shownValue} does. Not rounded: flooring `0.5` gives a
 * count of 0, and a string `"10"` is a configuration mistake to report, not to convert.
 */
export function positiveIntegerOption(value: unknown, name: string, fallback: number): number {
  if (absent(value)) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new InvalidOptionsError(`${name}: must be a positive integer, got ${shownValue(value)}`);
  }
  return value;
}

/** Field names of one component that another component spells differently, for {@link knownFields}. */
export interface ForeignFields {
  /** Who uses those names, for the message: `the outbox relay`. */
  owner: string;
  /** Each of its field names, and the name this component gives the same setting. */
  names: Readonly<Record<string, string>>;
}

/**
 * Refuse a field of the options object `value` that is not in `accepted`, naming the accepted ones (and,
 * for a field `foreign` lists, what it is called here). An unknown field would otherwise be ignored in
 * silence: the default would run instead of the setting its author believes in.
 */
export function knownFields(
  value: object,
  name: string,
  accepted: readonly string[],
  foreign?: ForeignFields,
): void {
  for (const field of Object.keys(value)) {
    if (accepted.includes(field)) continue;
    // Own names only: `constructor` or `toString` must not find Object.prototype's.
    const note =
      foreign !== undefined && Object.hasOwn(foreign.names, field)
        ? ` (the name ${foreign.owner} uses; here it is \`${foreign.names[field]}\`)`
        : '';
    throw new InvalidOptionsError(
      `${name}: unknown field ${JSON.stringify(field)}${note}; the fields are ${accepted.join(', ')}`,
    );
  }
}

/**
 * An option that is off (`false`), on with its defaults (absent, `null`, `true`), or an object of
 * settings; `undefined` for the defaults. Checked because a string from a configuration file (`'false'`)
 * would otherwise be read as settings and leave the feature on.
 */
export function switchOption<T extends object>(
  value: unknown,
  name: string,
): T | false | undefined {
  if (absent(value) || value === true) return undefined;
  if (value === false) return false;
  if (typeof value === 'object' && !Array.isArray(value)) return value as T;
  throw new InvalidOptionsError(
    `${name}: expected false or an object of settings, got ${shownValue(value)}`,
  );
}

/**
 * An object of callbacks (hooks): each `on…` property given a function. A misspelt value (`hooks: 'nope'`,
 * a hook set to a string) would otherwise be ignored until the moment it was meant to report something.
 * Other properties are left alone: a hooks object may carry what it was built with (`metrics`).
 */
export function callbacksOption<T extends object>(value: unknown, name: string): T | undefined {
  if (absent(value)) return undefined;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidOptionsError(
      `${name}: expected an object of functions, got ${shownValue(value)}`,
    );
  }
  for (const [key, callback] of Object.entries(value)) {
    if (!/^on[A-Z]/.test(key) || callback === undefined || callback === null) continue;
    if (typeof callback !== 'function') {
      throw new InvalidOptionsError(
        `${name}.${key}: expected a function, got ${shownValue(callback)}`,
      );
    }
  }
  return value as T;
}

// Duration options of the stores (sqliteStore and migrate, postgresStore, redisStore).

/** Bounds of a {@link durationOption}. */
export interface DurationOptionBounds {
  /** Whether `0` is taken (no wait at all). @default false */
  allowZero?: boolean;
  /** The longest value in ms: a timer's limit (`MAX_TIMER_MS`), say. @default 100 years, as `toMs` */
  maxMs?: number;
  /** Whether a number must be whole (a value written into a PRAGMA). @default false */
  integer?: boolean;
}

/**
 * A duration option: a number of ms, or a string `toMs` reads (`'500ms'`, `'30s'`, `'24h'`), as every
 * `…Ms` option takes; `fallback` when absent. A number is taken as given, not rounded. Else an
 * {@link InvalidOptionsError} showing the value as {@link shownValue} does: a string `"5000"` in quotes,
 * since a string without a unit (from an environment variable, say) is the usual slip.
 */
export function durationOption(
  value: unknown,
  name: string,
  fallback: number,
  { allowZero = false, maxMs = MAX_DURATION_MS, integer = false }: DurationOptionBounds = {},
): number {
  if (absent(value)) return fallback;
  let ms: unknown = value;
  let cause: unknown;
  if (typeof value === 'string') {
    try {
      ms = toMs(value as Duration, name);
    } catch (error) {
      cause = error;
    }
  }
  const fits =
    typeof ms === 'number' &&
    Number.isFinite(ms) &&
    (allowZero ? ms >= 0 : ms > 0) &&
    ms <= maxMs &&
    (!integer || Number.isInteger(ms));
  if (!fits) {
    const kind = `${allowZero ? 'non-negative' : 'positive'}${integer ? ' whole' : ''}`;
    const limit = maxMs === MAX_DURATION_MS ? '100 years' : `${maxMs} ms`;
    throw new InvalidOptionsError(
      `${name}: expected a ${kind} number of ms (at most ${limit}) or a duration like '500ms' or '30s', got ${shownValue(value)}`,
      { cause },
    );
  }
  return ms as number;
}
