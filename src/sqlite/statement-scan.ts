/**
 * Reading SQL text the way SQLite splits it into statements, to find the ones that would end the
 * transaction a `sqliteTransactional` handler runs in (see `transaction-guard.ts`). The PostgreSQL reading
 * (`../postgres/transaction-control.ts`) does not fit: SQLite's block comments do not nest (`/* a /* b *\/`
 * ends at the first `*\/`), a leading `;` is an empty statement SQLite skips, and `exec` runs every
 * statement of its text, so a `ROLLBACK` after the first one ends the transaction too.
 *
 * Only what decides where a statement starts and ends is read: white space, `--` and `/* *\/` comments,
 * string literals and quoted identifiers (`'…'`, `"…"`, `` `…` ``, `[…]`), words, and `;`, which ends a
 * statement except inside the body of a `CREATE [TEMP | TEMPORARY] TRIGGER … BEGIN … END`, where it ends
 * the trigger's own statements. The body ends at an `END` that follows a `;`, as `sqlite3_complete()`
 * reads it. A text SQLite would reject (an unclosed quote, a broken trigger) fails before the statements
 * after the error run, so reading more of it as statements only refuses what would not have run.
 * @module
 */

// How many leading words decide whether a statement ends the transaction: ROLLBACK TRANSACTION TO.
const WORDS = 3;

// Character classes as SQLite's tokenizer sees them: identifier characters include `$` (not first) and
// everything outside ASCII; white space is the C locale's.
const SPACE = /[\t\n\v\f\r ]/;
const WORD_START = /[A-Za-z_\u0080-\uffff]/;
const WORD_REST = /[A-Za-z0-9_$\u0080-\uffff]*/y;

/** What {@link nextToken} found: its kind and where it ends. */
interface Token {
  kind: 'space' | 'semi' | 'word' | 'other';
  end: number;
}

// The index after the closing `close` of a quoted token opened at `start`; a doubled `close` inside is
// an escaped one, except in `[…]`. Unclosed: the end of the text (SQLite's error token).
function quotedEnd(text: string, start: number, close: string): number {
  let i = start + 1;
  for (;;) {
    const found = text.indexOf(close, i);
    if (found === -1) return text.length;
    if (close !== ']' && text[found + 1] === close) i = found + 2;
    else return found + 1;
  }
}

/** The token that starts at `i` (which is inside `text`). */
function nextToken(text: string, i: number): Token {
  const char = text[i]!;
  if (SPACE.test(char)) return { kind: 'space', end: i + 1 };
  if (char === ';') return { kind: 'semi', end: i + 1 };
  if (char === '-' && text[i + 1] === '-') {
    const newline = text.indexOf('\n', i + 2);
    return { kind: 'space', end: newline === -1 ? text.length : newline + 1 };
  }
  if (char === '/' && text[i + 1] === '*') {
    // Not nested: the first `*/` closes it; unclosed, it runs to the end (no error in SQLite).
    const close = text.indexOf('*/', i + 2);
    return { kind: 'space', end: close === -1 ? text.length : close + 2 };
  }
  if (char === "'" || char === '"' || char === '`') {
    return { kind: 'other', end: quotedEnd(text, i, char) };
  }
  if (char === '[') return { kind: 'other', end: quotedEnd(text, i, ']') };
  WORD_REST.lastIndex = i + 1;
  const end = i + 1 + WORD_REST.exec(text)![0].length;
  if (WORD_START.test(char)) return { kind: 'word', end };
  // A number or a parameter (`1e5`, `?1`, `:end`, `$x`) is one token with the word characters after it:
  // `:end` is no END keyword.
  if (/[0-9?:@$#.]/.test(char)) return { kind: 'other', end };
  return { kind: 'other', end: i + 1 };
}

/**
 * The leading words of the first statement of `text` that is not empty (white space, comments and `;`
 * before it skipped), lower-cased, at most three; fewer when something else follows them (`(`, a quote).
 * That statement is the one `prepare` compiles (better-sqlite3 refuses a text with more than one).
 */
export function firstStatementWords(text: string): string[] {
  const words: string[] = [];
  let i = 0;
  while (words.length < WORDS && i < text.length) {
    const token = nextToken(text, i);
    if (token.kind === 'word') words.push(text.slice(i, token.end).toLowerCase());
    else if (token.kind === 'semi' ? words.length > 0 : token.kind !== 'space') break;
    i = token.end;
  }
  return words;
}

// sqlite3_complete()'s states (its "invalid" start state is START here) and token classes, which keep a
// trigger body's `;` inside its statement.
const START = 0;
const NORMAL = 1;
const EXPLAIN = 2;
const CREATE = 3;
const TRIGGER = 4;
const SEMI = 5;
const END = 6;
const C_SEMI = 0;
const C_SPACE = 1;
const C_OTHER = 2;
const C_EXPLAIN = 3;
const C_CREATE = 4;
const C_TEMP = 5;
const C_TRIGGER = 6;
const C_END = 7;
// TRANSITIONS[state][class], sqlite3_complete()'s table: CREATE [TEMP] TRIGGER enters the body, a `;`
// there leads to SEMI, an END right after it to END, and the `;` after that ends the statement.
const TRANSITIONS: readonly (readonly number[])[] = [
  /*         SEMI   SPACE   OTHER   EXPLAIN  CREATE  TEMP    TRIGGER  END */
  /* START   */ [START, START, NORMAL, EXPLAIN, CREATE, NORMAL, NORMAL, NORMAL],
  /* NORMAL  */ [START, NORMAL, NORMAL, NORMAL, NORMAL, NORMAL, NORMAL, NORMAL],
  /* EXPLAIN */ [START, EXPLAIN, EXPLAIN, NORMAL, CREATE, NORMAL, NORMAL, NORMAL],
  /* CREATE  */ [START, CREATE, NORMAL, NORMAL, NORMAL, CREATE, TRIGGER, NORMAL],
  /* TRIGGER */ [SEMI, TRIGGER, TRIGGER, TRIGGER, TRIGGER, TRIGGER, TRIGGER, TRIGGER],
  /* SEMI    */ [SEMI, SEMI, TRIGGER, TRIGGER, TRIGGER, TRIGGER, TRIGGER, END],
  /* END     */ [START, END, TRIGGER, TRIGGER, TRIGGER, TRIGGER, TRIGGER, TRIGGER],
];
const KEYWORD_CLASSES: ReadonlyMap<string, number> = new Map([
  ['explain', C_EXPLAIN],
  ['create', C_CREATE],
  ['temp', C_TEMP],
  ['temporary', C_TEMP],
  ['trigger', C_TRIGGER],
  ['end', C_END],
]);

/**
 * The leading words (as {@link firstStatementWords}) of every statement of `text` that begins with a word,
 * in order: the statements `exec` runs one after the other. Empty statements are left out, and so are
 * statements that begin with something else (`(`, a quote), which are no transaction control.
 */
export function statementWords(text: string): string[][] {
  const statements: string[][] = [];
  let state = START;
  // The current statement's leading words; `reading` while only words and white space have been seen.
  let words: string[] = [];
  let reading = true;
  let i = 0;
  while (i < text.length) {
    const token = nextToken(text, i);
    let tokenClass = C_OTHER;
    if (token.kind === 'word') {
      const word = text.slice(i, token.end).toLowerCase();
      if (reading && words.length < WORDS) words.push(word);
      tokenClass = KEYWORD_CLASSES.get(word) ?? C_OTHER;
    } else if (token.kind === 'space') {
      tokenClass = C_SPACE;
    } else if (token.kind === 'semi') {
      tokenClass = C_SEMI;
    }
    if (token.kind === 'other') reading = false;
    const next = TRANSITIONS[state]![tokenClass]!;
    if (tokenClass === C_SEMI) {
      if (next === START) {
        // The end of a statement, or an empty one.
        if (words.length > 0) statements.push(words);
        words = [];
        reading = true;
      } else {
        reading = false; // a `;` inside a trigger body: what follows is not this statement's start
      }
    }
    state = next;
    i = token.end;
  }
  // The last statement needs no `;` (SQLite adds one at the end of the text).
  if (words.length > 0) statements.push(words);
  return statements;
}

/**
 * Whether a statement with these leading words ends the transaction it runs in, or would open another:
 * BEGIN, COMMIT, END, and ROLLBACK other than ROLLBACK [TRANSACTION] TO [SAVEPOINT] name (which stays
 * inside it, as SAVEPOINT and RELEASE do).
 */
export function endsTransaction(words: readonly string[]): boolean {
  const [first, second, third] = words;
  if (first === 'begin' || first === 'commit' || first === 'end') return true;
  return first === 'rollback' && !(second === 'to' || (second === 'transaction' && third === 'to'));
}
