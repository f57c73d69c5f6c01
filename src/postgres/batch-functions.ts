/**
 * When the store must do without the batch functions of migration 0003 (`<table>_claim_many`,
 * `<table>_complete_many`; their names come from `batchFunctionNames` in `./identifiers.ts`).
 * @module
 */
import { SqlState, sqlState } from './client.js';

/**
 * Whether `error` says the store cannot call the batch function `functionName` at all, so it should send
 * the batch statements instead:
 * - 42883, the function does not exist: a schema not yet migrated to 0003;
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
