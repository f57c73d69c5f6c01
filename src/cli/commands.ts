/**
 * What the CLI's commands do, given an open store (or a PostgreSQL pool, for `migrate`) and somewhere to
 * print: kept apart from `run.ts`, which opens the store the command line names, so they run in-process
 * in tests as well as from the `bin`.
 * @module
 */

import { listCrashedKeys } from '../core/crashed-keys.js';
import { InvalidOptionsError } from '../core/errors.js';
import { inspectKey, KeyState } from '../core/inspection.js';
import { isReservedScope } from '../core/reserved-scopes.js';
import type { PgQueryable } from '../postgres/client.js';
import { migrate } from '../postgres/migrate.js';
import { migrate as migrateSqlite } from '../sqlite/migrate.js';
import type { Store } from '../store/store.js';
import type { DatabaseArgs } from './args.js';
import { crashedPageJson, crashedPageLines } from './crashed-report.js';
import type { InspectTarget } from './inspect-target.js';
import { inspectionJson, inspectionLines, statsLines } from './key-report.js';
import type { PurgeProgress } from './purge-progress.js';

/** Where a command writes its report. */
export type Print = (line: string) => void;

/** How the reports name a PostgreSQL table: `schema.table`. */
export function postgresTarget(args: DatabaseArgs): string {
  return `${args.schema ?? 'public'}.${args.table ?? 'idempotency_records'}`;
}

/**
 * `migrate` on PostgreSQL: apply pending migrations and say what happened, on `print`; a table a newer release
 * migrated further is said on `warn` instead (see {@link aheadWarning}).
 */
export async function migrateCommand(
  pool: PgQueryable,
  args: DatabaseArgs & { lockTimeoutMs?: number; lockRetries?: number },
  print: Print,
  warn: Print,
): Promise<void> {
  const options = {
    // An empty name is the store's to refuse, not absent: read as absent, it named another
    // application's table on a shared database (`--table "$UNSET"`).
    ...(args.schema !== undefined && { schema: args.schema }),
    ...(args.table !== undefined && { table: args.table }),
    ...(args.lockTimeoutMs !== undefined && { lockTimeoutMs: args.lockTimeoutMs }),
    ...(args.lockRetries !== undefined && { lockRetries: args.lockRetries }),
  };
  const result = await migrate(pool, options);
  const target = postgresTarget(args);
  if (result.applied.length > 0) {
    print(`${target}: applied ${result.applied.join(', ')} (now at version ${result.version})`);
  }
  // A table a newer release migrated further is not "up to date" for this one: say what it is at.
  if (result.warning !== undefined) warn(aheadWarning(result.warning));
  else if (result.applied.length === 0)
    print(`${target} is up to date (version ${result.version})`);
}

/**
 * `migrate` on SQLite: create the file if needed, apply pending migrations and say what happened, on
 * `print`; a table a newer release migrated further is said on `warn` instead, as on PostgreSQL.
 */
export function migrateSqliteCommand(
  file: string,
  args: DatabaseArgs,
  print: Print,
  warn: Print,
): void {
  const table = args.table ?? 'idempotency_records';
  const result = migrateSqlite(file, { table });
  if (result.applied.length > 0) print(`${file} (${table}): applied ${result.applied.join(', ')}`);
  if (result.warning !== undefined) warn(aheadWarning(`${file}: ${result.warning}`));
  else if (result.applied.length === 0) print(`${file} (${table}) is up to date`);
}

/**
 * The line `migrate` writes to standard error for a table a newer release migrated further (`warning`, from
 * `migrate()`'s result). Not an error: nothing failed, this release runs on it, and the command exits 0, so
 * that a deploy's start-up step carries on. But it is no report either: on standard output, where a deploy
 * script sends or parses the report, nobody saw it, and the rollback or mixed deploy that left the table
 * there went unnoticed. Standard error is where the operator, and the deploy's log, look for what went amiss.
 */
export function aheadWarning(warning: string): string {
  return `idempotency-kit migrate: warning: ${warning}`;
}

/** What `purge` did: how many records it deleted, and the signal that stopped it early, if one did. */
export interface PurgeResult {
  purged: number;
  stoppedBy?: string;
}

/**
 * `purge`: delete expired records batch by batch until none is left or `batches` ran, or `stopRequested`
 * names a signal (checked between batches: the one in flight, a short transaction, finishes first).
 * A batch that fails ends the command (rethrown) once the report says what the earlier batches deleted:
 * that stays deleted, and without the count a run that did most of the work reads like one that did none.
 */
export async function purgeCommand(
  store: Store,
  args: {
    limit: number;
    batches: number;
    stopRequested?: () => string | undefined;
    /** Told of each batch, for the progress lines on stderr (default: none). */
    progress?: PurgeProgress;
  },
  print: Print,
): Promise<PurgeResult> {
  const { purgeExpired } = store;
  if (purgeExpired === undefined || !store.capabilities.purge) {
    throw new InvalidOptionsError(`the ${store.name} store has nothing to purge`);
  }
  let total = 0;
  let batches = 0;
  while (batches < args.batches) {
    const stoppedBy = args.stopRequested?.();
    if (stoppedBy !== undefined) {
      print(`${purgedLine(total, batches)}; stopped by ${stoppedBy}`);
      return { purged: total, stoppedBy };
    }
    let deleted: number;
    try {
      deleted = await purgeExpired.call(store, { limit: args.limit });
    } catch (error) {
      print(`${purgedLine(total, batches)}; batch ${batches + 1} failed`);
      throw error;
    }
    batches++;
    total += deleted;
    // A short batch means nothing expired is left (rows locked by a live claim are skipped, not waited on).
    if (deleted < args.limit) break;
    // Only while more is to come: the last batch's total is the result line's.
    args.progress?.batchDone(total, batches);
    // Let the event loop turn before the next batch: a synchronous store (SQLite) resolves its purge
    // without one, and a SIGINT or SIGTERM reaches `stopRequested` only through a turn of the loop.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  print(purgedLine(total, batches));
  return { purged: total };
}

/** `purged 2314 expired records in 3 batches`. */
function purgedLine(total: number, batches: number): string {
  return `purged ${total} expired record${total === 1 ? '' : 's'} in ${batches} batch${batches === 1 ? '' : 'es'}`;
}

/**
 * `inspect`: print a storage key's record and what the next request with that key meets (one read).
 * @returns the key's state
 */
export async function inspectCommand(
  store: Store,
  args: InspectTarget & { json: boolean },
  print: Print,
): Promise<string> {
  const inspection = await inspectKey(store, args.storageKey);
  if (args.json) {
    print(inspectionJson(inspection));
    return inspection.state;
  }
  for (const line of inspectionLines(inspection)) print(line);
  // "Absent" answers "was it executed?" only for the namespace and scope given: the same client key in
  // another scope (an HTTP request's credentials digest) is another record.
  if (args.derived !== undefined && inspection.state === KeyState.Absent) {
    const { namespace, scope, http } = args.derived;
    const from = http === true ? " (an HTTP route's, --http)" : '';
    print(
      `  derived from --key in namespace ${JSON.stringify(namespace)} and scope ${JSON.stringify(scope)}${from}: ` +
        'a request in another scope (HTTP: a digest of its credentials, unless the middleware sets scope) ' +
        'is stored under another key',
    );
    // An HTTP route's scope under a consumer's prefix is keyed apart from the consumer's records: the
    // key derived as a consumer's is not where the middleware put it.
    if (http !== true && isReservedScope(scope)) {
      print(
        `  if ${JSON.stringify(scope)} came from an HTTP route's scope, not a consumer's, add --http: ` +
          'the HTTP middleware keys a scope starting consumer:, handed-back: or dead-letter: apart',
      );
    }
  }
  return inspection.state;
}

/**
 * `list --crashed`: print one page of the keys whose request crashed while their key stays reserved for
 * it (one scan of the store), each explained as `inspect` explains it, and how to read the next page;
 * `target` names what was read.
 * @returns how many keys the page held
 */
export async function listCrashedCommand(
  store: Store,
  target: string,
  args: { limit: number; after?: string; json: boolean },
  print: Print,
): Promise<number> {
  const options =
    args.after === undefined ? { limit: args.limit } : { limit: args.limit, after: args.after };
  const page = await listCrashedKeys(store, options);
  if (args.json) print(crashedPageJson(store.name, target, page));
  else for (const line of crashedPageLines(`${target} (${store.name})`, page)) print(line);
  return page.keys.length;
}

/** `stats`: print the store's counts by state (one aggregate read); `target` names what was counted. */
export async function statsCommand(
  store: Store,
  target: string,
  args: { json: boolean },
  print: Print,
): Promise<void> {
  const stats = await store.stats();
  if (args.json) print(JSON.stringify({ store: store.name, target, ...stats }));
  else for (const line of statsLines(`${target} (${store.name})`, stats)) print(line);
}
