/**
 * What the CLI's commands do, given a connected pool and somewhere to print: kept apart from `main.ts` so
 * they run in-process in tests as well as from the `bin`.
 * @module
 */

import type { PgQueryable } from '../postgres/client.js';
import { migrate } from '../postgres/migrate.js';
import { postgresStore } from '../postgres/postgres-store.js';
import type { DatabaseArgs } from './args.js';

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
  const target = `${args.schema ?? 'public'}.${args.table ?? 'idempotency_records'}`;
  print(
    result.applied.length === 0
      ? `${target} is up to date (version ${result.version})`
      : `${target}: applied ${result.applied.join(', ')} (now at version ${result.version})`,
  );
}

/** `purge`: delete expired rows batch by batch until none is left or `batches` ran; return the count. */
export async function purgeCommand(
  pool: PgQueryable,
  args: DatabaseArgs & { limit: number; batches: number },
  print: Print,
): Promise<number> {
  const store = postgresStore({
    pool,
    ...(args.schema && { schema: args.schema }),
    ...(args.table && { table: args.table }),
  });
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
