/**
 * Refusing node-postgres's native client (`pg.native`: the `pg-native` package over libpq). It hands every
 * parameter to libpq as a C string in text format, so a `Buffer` is cut at its first zero byte and what is
 * left is read by PostgreSQL in `bytea`'s escape format (a backslash starts an escape). A handler's value is
 * stored behind the envelope's bytes `01 00`: through such a client its completion stored the single byte
 * `01`, and every replay of the key, through any client, failed (`Unknown outcome tag undefined`) for the
 * whole retention. Checked where the store and the transactional mode are created (and on each connection
 * the transactional mode checks out), so no outcome is ever stored that way; the outbox's `enqueue` checks
 * the connection it is given, so no message is. (Arrays, the batches' parameters, are sent as array
 * literals with `\x` hex elements and arrive intact; the single-key completion and the outbox's insert
 * send a bare `Buffer`.)
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import { isNodePostgres, type PgQueryable } from './client.js';

/**
 * True for a node-postgres native `Client` or `PoolClient` (it carries its pg-native connection as
 * `native`, which the JavaScript client never has), and for a pool that creates them: `pg.native.Pool`, a
 * `pg.Pool({ Client: pg.native.Client })`, or `pg.Pool` itself under `NODE_PG_FORCE_NATIVE`. A pool is only
 * known by the client constructor it keeps (`pool.Client`, set by pg-pool); of the two, only the native
 * client's prototype has `_hasActiveQuery` (node-postgres 8.0 to 8.x).
 */
export function isNativeClient(value: PgQueryable): boolean {
  if (!isNodePostgres(value)) return false;
  const { native, Client } = value as { native?: unknown; Client?: unknown };
  if (typeof native === 'object' && native !== null) return true;
  return typeof Client === 'function' && typeof Client.prototype?._hasActiveQuery === 'function';
}

/** What a refusal of the native client says: what was passed, what would go wrong, what to pass instead. */
export interface NativeClientRefusal {
  /** What was passed, as the message's subject (`` `pool` is (or hands out) ``). */
  readonly subject: string;
  /** What the cut `Buffer` would do, for this caller. */
  readonly harm: string;
  /** What to pass instead. */
  readonly instead: string;
}

// The store and the transactional mode: a pool, and outcomes no replay can read.
const OUTCOMES_REFUSAL: NativeClientRefusal = {
  subject: '`pool` is (or hands out)',
  harm: 'every outcome would be stored truncated and could never be replayed',
  instead:
    'Pass a pool of the JavaScript client (`new pg.Pool()` from `pg`, without NODE_PG_FORCE_NATIVE)',
};

/**
 * Throw when `value` is node-postgres's native client or a pool of it (see {@link isNativeClient}).
 * @param owner the factory named in the message (`postgresStore`, `postgresTransactional`, `enqueue`)
 * @param refusal the message's wording for `owner`; by default the store's (a pool, outcomes)
 * @throws InvalidOptionsError naming the JavaScript client to use instead
 */
export function refuseNativeClient(
  value: PgQueryable,
  owner: string,
  refusal: NativeClientRefusal = OUTCOMES_REFUSAL,
): void {
  if (!isNativeClient(value)) return;
  throw new InvalidOptionsError(
    `${owner}: ${refusal.subject} node-postgres's native client (pg.native, pg-native over libpq), which sends a ` +
      `Buffer parameter as text cut at its first zero byte: ${refusal.harm}. ${refusal.instead}`,
  );
}
