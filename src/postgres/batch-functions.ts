/**
 * When the store must do without the batch functions of migrations 0003–0005 (`<table>_claim_many`,
 * `<table>_complete_many`, `<table>_complete_claim`; their names come from `batchFunctionNames` in
 * `./identifiers.ts`).
 * @module
 */
import { SqlState, sqlState } from './client.js';

/**
 * Whether `error` says the store cannot call the batch function `functionName` at all, so it should send
 * the batch statements instead:
 * - 42883, the function does not exist: a schema not yet migrated to 0003 (0004 for `complete_claim`), or
 *   not yet to 0005, whose versions of `claim_many` and `complete_claim` take one more argument (the
 *   claim statements the store then sends need 0005's column too, and fail with a hint to migrate);
 * - 42501, permission denied for the function: a database whose default privileges revoke EXECUTE from
 *   PUBLIC, where the role that migrated is not the role that serves (the statements only need the table
 *   privileges the role already uses).
 *
 * Both codes also name other objects (a missing operator, a table without privileges), so the message
 * must name this function: any other error is the batch's own, and is thrown.
 */
export function isBatchFunctionUnusable(error: unknown, functionName: string): boolean {
  const state = sqlState(error);
  return (
    (state === SqlState.UndefinedFunction || state === SqlState.InsufficientPrivilege) &&
    error instanceof Error &&
    error.message.includes(functionName)
  );
}
