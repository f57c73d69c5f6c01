/**
 * Statements that would end (or try to open) the transaction `runInTransaction` runs a handler in, and the
 * check that it is still open. A handler that sent `COMMIT` or `ROLLBACK` through `tx` (often a library that
 * wraps its own `BEGIN … COMMIT` around the connection it is given) ended the transaction the claim is in:
 * its writes then commit without the record, or the record without them, and the completion that follows
 * runs in autocommit. A `ROLLBACK` followed by writes committed those writes with no record, and the retry
 * ran the handler a second time.
 * @module
 */

/**
 * The first `count` words of `text`, lower-cased, as PostgreSQL reads them: white space and comments
 * (`--` to the end of the line, and block comments, which nest) between them skipped, and so are empty
 * statements (`;`) before the first. Stops at anything else that is not a word (a `;` after a word, a
 * quote, `(`): the words after it belong to another statement or are no keywords.
 */
function leadingWords(text: string, count: number): string[] {
  const words: string[] = [];
  let i = 0;
  while (words.length < count && i < text.length) {
    const char = text[i]!;
    if (/\s/.test(char) || (char === ';' && words.length === 0)) {
      // A `;` before the first word ends an empty statement, which PostgreSQL skips: `; ROLLBACK` runs
      // the ROLLBACK (in a query with parameters too).
      i++;
    } else if (text.startsWith('--', i)) {
      const newline = text.indexOf('\n', i);
      i = newline === -1 ? text.length : newline + 1;
    } else if (text.startsWith('/*', i)) {
      let depth = 0;
      do {
        if (text.startsWith('/*', i)) {
          depth++;
          i += 2;
        } else if (text.startsWith('*/', i)) {
          depth--;
          i += 2;
        } else i++;
      } while (depth > 0 && i < text.length);
    } else {
      const word = /^[A-Za-z_]+/.exec(text.slice(i, i + 64))?.[0];
      if (word === undefined) break;
      words.push(word.toLowerCase());
      i += word.length;
    }
  }
  return words;
}

// The first keyword of a statement that ends the transaction, or would open another: BEGIN (a warning and
// nothing more inside one, but the library that sends it sends COMMIT next), START TRANSACTION, COMMIT,
// END, ABORT, ROLLBACK other than ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] (which stays inside it, as
// SAVEPOINT and RELEASE do), and PREPARE TRANSACTION (PREPARE name AS … is a prepared statement).
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
  return text !== undefined && endsTransaction(leadingWords(text, 3));
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
