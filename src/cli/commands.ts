/**
 * What the CLI's commands do, given a connected pool and somewhere to print: kept apart from `main.ts` so
 * they run in-process in tests as well as from the `bin`.
 * @module
 */

import { inspectKey } from '../core/inspection.js';
import type { PgQueryable } from '../postgres/client.js';
import { migrate } from '../postgres/migrate.js';
import { postgresStore } from '../postgres/postgres-store.js';
import type { DatabaseArgs } from './args.js';
import { inspectionJson, inspectionLines, statsLines } from './key-report.js';

/** Where a command writes its report. */
export type Print = (line: string) => void;

/** `migrate`: apply pending migrations and say what happened. */
export async function migrateCommand(
  pool: PgQueryable,
  args: DatabaseArgs,
  print: Print,
): Promise<void> {
  const options = {
    ...(args.schema && { schema: args.schema }),
    ...(args.table && { table: args.table }),
  };
  const result = await migrate(pool, options);
  const target = targetOf(args);
  print(
    result.applied.length === 0
      ? `${target} is up to date (version ${result.version})`
      : `${target}: applied ${result.applied.join(', ')} (now at version ${result.version})`,
  );
}

function storeFor(pool: PgQueryable, args: DatabaseArgs) {
  return postgresStore({
    pool,
    ...(args.schema && { schema: args.schema }),
    ...(args.table && { table: args.table }),
  });
}

function targetOf(args: DatabaseArgs): string {
  return `${args.schema ?? 'public'}.${args.table ?? 'idempotency_records'}`;
}

/**
 * `inspect`: print a storage key's record and what the next request with that key meets (one read).
 * @returns the key's state
 */
export async function inspectCommand(
  pool: PgQueryable,
  args: DatabaseArgs & { storageKey: string; json: boolean },
  print: Print,
): Promise<string> {
  const inspection = await inspectKey(storeFor(pool, args), args.storageKey);
  if (args.json) print(inspectionJson(inspection));
  else for (const line of inspectionLines(inspection)) print(line);
  return inspection.state;
}

/** `stats`: print the records table's counts by state (one aggregate query). */
export async function statsCommand(
  pool: PgQueryable,
  args: DatabaseArgs & { json: boolean },
  print: Print,
): Promise<void> {
  const stats = await storeFor(pool, args).stats();
  if (args.json) print(JSON.stringify({ table: targetOf(args), ...stats }));
  else for (const line of statsLines(targetOf(args), stats)) print(line);
}

/** `purge`: delete expired rows batch by batch until none is left or `batches` ran; return the count. */
export async function purgeCommand(
  pool: PgQueryable,
  args: DatabaseArgs & { limit: number; batches: number },
  print: Print,
): Promise<number> {
  const store = storeFor(pool, args);
  let total = 0;
  let batches = 0;
  while (batches < args.batches) {
    const deleted = await store.purgeExpired({ limit: args.limit });
    batches++;
    total += deleted;
    // A short batch means nothing expired is left (rows locked by a live claim are skipped, not waited on).
    if (deleted < args.limit) break;
  }
  print(
    `purged ${total} expired record${total === 1 ? '' : 's'} in ${batches} batch${batches === 1 ? '' : 'es'}`,
  );
  return total;
}
