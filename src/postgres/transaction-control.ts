/**
 * Statements that would end (or try to open) the transaction `runInTransaction` runs a handler in, and the
 * check that it is still open. A handler that sent `COMMIT` or `ROLLBACK` through `tx` (often a library that
 * wraps its own `BEGIN … COMMIT` around the connection it is given) ended the transaction the claim is in:
 * its writes then commit without the record, or the record without them, and the completion that follows
 * runs in autocommit. A `ROLLBACK` followed by writes committed those writes with no record, and the retry
 * ran the handler a second time.
 * @module
 */

// Leading white space and comments, which PostgreSQL skips before a statement's first keyword.
const LEADING_NOISE = /^(?:\s+|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*/;

// The first keyword of a statement that ends the transaction, or would open another: BEGIN (a warning and
// nothing more inside one, but the library that sends it sends COMMIT next), START TRANSACTION, COMMIT,
// END, ABORT, ROLLBACK other than ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] (which stays inside it, as
// SAVEPOINT and RELEASE do), and PREPARE TRANSACTION (PREPARE name AS … is a prepared statement).
const ENDS_TRANSACTION =
  /^(?:begin|start|commit|end|abort|rollback(?!\s+(?:(?:work|transaction)\s+)?to\b)|prepare\s+transaction)\b/i;

/**
 * The text of what a handler passed to `query`: a string, or a query config (`{ text }`); `undefined` for
 * anything else (a submittable carries its own text, and is passed as is).
 */
function statementText(statement: unknown): string | undefined {
  if (typeof statement === 'string') return statement;
  const text = (statement as { text?: unknown } | null | undefined)?.text;
  return typeof text === 'string' ? text : undefined;
}

/**
 * Whether `statement` (the first argument of a `query` call) begins with a transaction-control keyword
 * that would end the transaction it is sent in (see the module). Savepoints pass.
 */
export function isTransactionControl(statement: unknown): boolean {
  const text = statementText(statement);
  return text !== undefined && ENDS_TRANSACTION.test(text.replace(LEADING_NOISE, ''));
}

/**
 * Whether the connection's last answer said no transaction is open (node-postgres's
 * `getTransactionStatus()`, from the server's ReadyForQuery: `'I'` idle, `'T'` in a transaction, `'E'` in a
 * failed one). It catches what {@link isTransactionControl} cannot see: a `COMMIT` later in a string of
 * several statements. `false` for a client without the method (node-postgres before 8.21, other drivers) or that does not
 * know (the native client answers `null`).
 */
export function transactionEnded(client: unknown): boolean {
  const status = (client as { getTransactionStatus?: unknown } | null)?.getTransactionStatus;
  return typeof status === 'function' && status.call(client) === 'I';
}
