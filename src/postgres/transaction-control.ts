/**
 * Statements that would end (or try to open) the transaction `runInTransaction` runs a handler in, and the
 * check that it is still open. A handler that sent `COMMIT` or `ROLLBACK` through `tx` (often a library that
 * wraps its own `BEGIN … COMMIT` around the connection it is given) ended the transaction the claim is in:
 * its writes then commit without the record, or the record without them, and the completion that follows
 * runs in autocommit. A `ROLLBACK` followed by writes committed those writes with no record, and the retry
 * ran the handler a second time.
 *
 * Every statement of the text is looked at, not the first one only: node-postgres sends a query without
 * parameters as a simple query, which may hold several statements, and the server runs them all, so
 * `SELECT 1; ROLLBACK; INSERT …` dropped the claim and committed the INSERT with no record (seen only after
 * the handler, when the retry would charge again). The text is split as PostgreSQL's scanner splits it
 * (`statement-scan.ts`), before anything is sent: no round trip, no setting changed on the connection.
 *
 * Checked and set aside: making every transaction after an end unable to write (the session's
 * `default_transaction_read_only = on` around the run's `BEGIN … READ WRITE`). A handler's `ROLLBACK` undoes
 * a `SET` made in the transaction, or in the same query as its `BEGIN`, so the setting would need a
 * committed transaction of its own (a round trip more per run, or a `COMMIT` the server logs a warning for
 * on every run) and another to restore it on every path; `BEGIN READ WRITE` or `SET transaction_read_only =
 * off` after the `ROLLBACK` still wrote, temporary tables are writable anyway, and a `COMMIT` among the
 * statements had still committed the claim with part of the writes. Refusing the text before it is sent
 * covers all of these. What the text cannot show (a submittable without a text, a statement the scanner
 * reads otherwise than the server) the connection's transaction status tells once the server has answered
 * it: {@link watchTransactionStatus}, read as each statement through `tx` settles and before the next is
 * sent, so that nothing is sent after the end (`transactional.ts`; what is recorded then is
 * `transaction-end.ts`'s).
 * @module
 */
import { statementWords } from './statement-scan.js';

// The first keyword of a statement that ends the transaction, or would open another: BEGIN (a warning and
// nothing more inside one, but the library that sends it sends COMMIT next), START TRANSACTION, COMMIT,
// END, ABORT, ROLLBACK other than ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] (which stays inside it, as
// SAVEPOINT and RELEASE do), and PREPARE TRANSACTION (PREPARE name AS … is a prepared statement). COMMIT
// AND CHAIN and ROLLBACK AND CHAIN open a new transaction, without the claim. A DO block or a procedure
// that commits cannot end it: inside a transaction block the server refuses that (2D000).
const ENDS_TRANSACTION = new Set(['begin', 'start', 'commit', 'end', 'abort']);

function endsTransaction(words: readonly string[]): boolean {
  const [first, second, third] = words;
  if (first === undefined) return false;
  if (ENDS_TRANSACTION.has(first)) return true;
  if (first === 'rollback') {
    return !(
      second === 'to' ||
      ((second === 'work' || second === 'transaction') && third === 'to')
    );
  }
  return first === 'prepare' && second === 'transaction';
}

/**
 * The text of what a handler passed to `query`: a string, a query config or `Query` (`{ text }`), or a
 * submittable that keeps its text on a cursor (pg-query-stream's `{ cursor: { text } }`); `undefined` for
 * anything else.
 */
function statementText(statement: unknown): string | undefined {
  if (typeof statement === 'string') return statement;
  const config = statement as { text?: unknown; cursor?: { text?: unknown } } | null | undefined;
  const text = config?.text ?? config?.cursor?.text;
  return typeof text === 'string' ? text : undefined;
}

/**
 * Whether `statement` (the first argument of a `query` call) holds a statement, first or later, that would
 * end the transaction it is sent in (see the module): the text read both with and without backslash
 * escapes in plain strings, since `standard_conforming_strings` may be either. Savepoints pass.
 */
export function isTransactionControl(statement: unknown): boolean {
  const text = statementText(statement);
  if (text === undefined) return false;
  if (statementWords(text, false).some(endsTransaction)) return true;
  // Without a backslash, both readings are the same.
  return text.includes('\\') && statementWords(text, true).some(endsTransaction);
}

/**
 * `read.call(client)`, or `undefined` if it throws: node-postgres's native client from 8.21 has the method
 * but asks pg-native for the answer, and pg-native before 3.8 has no such method (a `TypeError` on every
 * call, for a pairing pg's peer range `pg-native >=3.0.1` allows). Thrown, it failed every run that sent a
 * statement through `tx`, and from the catch that ends a failed run it skipped the `ROLLBACK`: the
 * connection went back to the pool inside the transaction, holding the key's claim.
 */
function readStatus(client: unknown, read: (this: unknown) => unknown): unknown {
  try {
    return read.call(client);
  } catch {
    return undefined;
  }
}

/** Whether a connection is out of a transaction, read from the server's last ReadyForQuery. */
export interface TransactionStatusWatch {
  /** True once the server's last answer said no transaction is open (status `'I'`). */
  idle(): boolean;
  /** Stop watching (removes the listener of a client before node-postgres 8.21). */
  stop(): void;
}

interface ReadyForQueryEmitter {
  on(
    event: 'readyForQuery',
    listener: (message: { status?: unknown } | undefined) => void,
  ): unknown;
  prependListener?(
    event: 'readyForQuery',
    listener: (message: { status?: unknown } | undefined) => void,
  ): unknown;
  removeListener(event: 'readyForQuery', listener: (...args: never[]) => void): unknown;
}

const NO_WATCH: TransactionStatusWatch = { idle: () => false, stop: () => {} };

/**
 * Watch `client`'s transaction status: node-postgres 8.21's `getTransactionStatus()` where it exists (a
 * field read per call, no listener); before 8.21, the `readyForQuery` messages of its `connection`, whose
 * `status` the client has always been told but did not keep (our listener runs before the client's, which
 * calls the statement's callback there and then: a callback that sends the next statement at once, after
 * the one that ended the transaction, finds the end already seen). Neither
 * (another driver, the native client's `null`, or its `TypeError` over pg-native before 3.8): never idle,
 * and only the statement scan guards the run.
 */
export function watchTransactionStatus(client: unknown): TransactionStatusWatch {
  const method = (client as { getTransactionStatus?: unknown } | null)?.getTransactionStatus;
  const read = typeof method === 'function' ? (method as () => unknown) : undefined;
  // A method that cannot answer (see readStatus) is no method: the native client then has no
  // `connection` to listen to either, and only the statement scan guards the run.
  if (read !== undefined && readStatus(client, read) !== undefined) {
    return { idle: () => readStatus(client, read) === 'I', stop: () => {} };
  }
  const connection = (client as { connection?: Partial<ReadyForQueryEmitter> } | null)?.connection;
  if (typeof connection?.on !== 'function' || typeof connection.removeListener !== 'function') {
    return NO_WATCH;
  }
  const emitter = connection as ReadyForQueryEmitter;
  let status: unknown;
  const listener = (message: { status?: unknown } | undefined) => {
    status = message?.status;
  };
  if (typeof emitter.prependListener === 'function')
    emitter.prependListener('readyForQuery', listener);
  else emitter.on('readyForQuery', listener);
  return {
    idle: () => status === 'I',
    stop: () => void emitter.removeListener('readyForQuery', listener),
  };
}
