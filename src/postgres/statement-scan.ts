/**
 * Reading SQL text the way PostgreSQL splits a simple query into statements, to find the ones that would
 * end the transaction a `runInTransaction` handler runs in (see `transaction-control.ts`). node-postgres
 * sends a query without parameters as a simple query, and the server runs every statement of it, one after
 * the other: `SELECT 1; ROLLBACK; INSERT …` dropped the claim and committed the INSERT with no record.
 *
 * Only what decides where a statement starts and ends is read: white space, `--` comments and `/* *\/`
 * comments (which nest), string literals (`'…'`, `E'…'` with backslash escapes, `B'…'`, `X'…'`, `N'…'`,
 * `U&'…'`, each with its continuations: a `'…'` after white space holding a newline is read as the literal
 * it continues, so `E'…'` then `'\'…'` escapes the quote), dollar quotes (`$$…$$`, `$tag$…$tag$`), quoted
 * identifiers (`"…"`, `U&"…"`), words, and `;`, which ends a statement except inside the body of a
 * `CREATE [OR REPLACE] FUNCTION | PROCEDURE … BEGIN ATOMIC … END`. That body ends at the first `END` right
 * after its `BEGIN ATOMIC` or a `;`: no statement of a body begins with END (the grammar keeps `BEGIN` and
 * `END` statements out of it), while an `END` elsewhere may be no keyword (`SELECT 1 AS end`, `t.end`), and
 * psql's count of `CASE … END` read `AS case` as an opening, kept the body open past its end and hid the
 * `ROLLBACK` after it. A body inside a body ends early, which only reads more statements (refused, never
 * hidden). The server parses the whole text before it
 * runs any of it, so a text it would reject (an unclosed quote or body) runs nothing, and reading more of it
 * as statements only refuses what would not have run.
 *
 * Whether a backslash escapes a quote in a plain `'…'` string depends on the session's
 * `standard_conforming_strings`, which the driver does not report: {@link statementWords} is asked for one
 * reading, and the caller reads the text both ways.
 * @module
 */

// How many leading words decide whether a statement ends the transaction: ROLLBACK TRANSACTION TO.
const WORDS = 3;

// Character classes of PostgreSQL's scanner: identifiers may hold `$` and digits (not first), and every
// character outside ASCII; white space is the C locale's.
const SPACE = /[\t\n\v\f\r ]+/y;
// A run of characters none of which starts a token that matters here (digits, commas, operators other
// than `-` and `/`, which may open a comment): read at once, a long VALUES list is read quickly.
const PLAIN = /[^\t\n\v\f\r ;()'"$A-Za-z_\u0080-\uffff/-]+/y;
const WORD_START = /[A-Za-z_\u0080-\uffff]/;
const WORD = /[A-Za-z_\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*/y;
// Where a `--` comment ends.
const LINE_END = /[\n\r]/g;
// `$tag$` or `$$`, where a dollar quote may start (not inside a word: `a$b$` is one identifier).
const DOLLAR_DELIMITER = /\$(?:[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/y;

/** What {@link nextToken} found: its kind and where it ends. */
interface Token {
  kind: 'space' | 'semi' | 'word' | 'open' | 'close' | 'other';
  end: number;
}

/**
 * The index after the quote that closes the literal or identifier whose opening `quote` is at `start`.
 * A doubled quote is one inside it; with `backslash`, so is `\` and the character after it. Unclosed: the
 * end of the text (a syntax error, which runs nothing).
 */
function quotedEnd(text: string, start: number, quote: string, backslash: boolean): number {
  let i = start + 1;
  for (;;) {
    const next = text.indexOf(quote, i);
    if (next === -1) return text.length;
    // With backslash escapes, the quote is one inside if an odd number of backslashes stands before it.
    let backslashes = 0;
    while (backslash && text[next - 1 - backslashes] === '\\' && next - 1 - backslashes >= i) {
      backslashes++;
    }
    if (backslashes % 2 === 1) i = next + 1;
    else if (text[next + 1] === quote) i = next + 2;
    else return next + 1;
  }
}

/**
 * Where the string literal whose opening quote is at `start` ends, its continuations included: after the
 * closing quote, white space holding a newline (with `--` comments) and another `'` go on with the same
 * literal, read the same way (PostgreSQL's `quotecontinue`: an `E'…'` continued by `'…'` still takes
 * backslash escapes). Read by hand, not by a regular expression, so that it stays linear.
 */
function literalEnd(text: string, start: number, backslash: boolean): number {
  let end = quotedEnd(text, start, "'", backslash);
  for (;;) {
    const next = continuation(text, end);
    if (next === -1) return end;
    end = quotedEnd(text, next, "'", backslash);
  }
}

/** The index of the `'` that continues a literal closed just before `i`, or -1 (see {@link literalEnd}). */
function continuation(text: string, i: number): number {
  let newline = false;
  for (;;) {
    const char = text[i];
    if (char === "'") return newline ? i : -1;
    if (char === '\n' || char === '\r') {
      newline = true;
      i++;
    } else if (char === ' ' || char === '\t' || char === '\f' || char === '\v') {
      i++;
    } else if (char === '-' && text[i + 1] === '-') {
      // A comment, which must end at a newline to continue the literal.
      LINE_END.lastIndex = i + 2;
      if (LINE_END.exec(text) === null) return -1;
      i = LINE_END.lastIndex - 1;
    } else return -1;
  }
}

/** The index after the `*\/` that closes the block comment opened at `start`; block comments nest. */
function blockCommentEnd(text: string, start: number): number {
  let depth = 0;
  let i = start;
  do {
    if (text.startsWith('/*', i)) {
      depth++;
      i += 2;
    } else if (text.startsWith('*/', i)) {
      depth--;
      i += 2;
    } else i++;
  } while (depth > 0 && i < text.length);
  return Math.min(i, text.length);
}

/**
 * The token at `i` (inside `text`). `backslashQuotes`: whether a plain `'…'` string takes backslash
 * escapes (`standard_conforming_strings = off`).
 */
function nextToken(text: string, i: number, backslashQuotes: boolean): Token {
  const char = text[i]!;
  SPACE.lastIndex = i;
  if (SPACE.test(text)) return { kind: 'space', end: SPACE.lastIndex };
  if (char === ';') return { kind: 'semi', end: i + 1 };
  if (char === '(') return { kind: 'open', end: i + 1 };
  if (char === ')') return { kind: 'close', end: i + 1 };
  if (char === '-' && text[i + 1] === '-') {
    // To the end of the line, which PostgreSQL ends at \n or \r.
    LINE_END.lastIndex = i + 2;
    return { kind: 'space', end: LINE_END.exec(text) === null ? text.length : LINE_END.lastIndex };
  }
  if (char === '/' && text[i + 1] === '*') return { kind: 'space', end: blockCommentEnd(text, i) };
  if (char === "'") return { kind: 'other', end: literalEnd(text, i, backslashQuotes) };
  if (char === '"') return { kind: 'other', end: quotedEnd(text, i, '"', false) };
  if (char === '$') {
    DOLLAR_DELIMITER.lastIndex = i;
    const delimiter = DOLLAR_DELIMITER.exec(text)?.[0];
    if (delimiter === undefined) return { kind: 'other', end: i + 1 }; // `$1`, a parameter
    const close = text.indexOf(delimiter, i + delimiter.length);
    return { kind: 'other', end: close === -1 ? text.length : close + delimiter.length };
  }
  if (!WORD_START.test(char)) {
    PLAIN.lastIndex = i;
    return { kind: 'other', end: PLAIN.test(text) ? PLAIN.lastIndex : i + 1 };
  }
  WORD.lastIndex = i;
  const end = i + WORD.exec(text)![0].length;
  // A one-letter prefix opens a literal: E'…' reads backslash escapes, B'…', X'…', N'…' do not (N'…' as
  // a plain string does), U&'…' and U&"…" never do.
  if (end === i + 1 && text[end] === "'") {
    const prefix = char.toLowerCase();
    if (prefix === 'e') return { kind: 'other', end: literalEnd(text, end, true) };
    if (prefix === 'n') return { kind: 'other', end: literalEnd(text, end, backslashQuotes) };
    if (prefix === 'b' || prefix === 'x') {
      return { kind: 'other', end: literalEnd(text, end, false) };
    }
  }
  if (end === i + 1 && (char === 'u' || char === 'U') && text[end] === '&') {
    const quote = text[end + 1];
    if (quote === "'") return { kind: 'other', end: literalEnd(text, end + 1, false) };
    if (quote === '"') return { kind: 'other', end: quotedEnd(text, end + 1, quote, false) };
  }
  return { kind: 'word', end };
}

// Where the words of a `CREATE [OR REPLACE] FUNCTION | PROCEDURE` statement put it: such a statement may
// have a `BEGIN ATOMIC … END` body, whose `;` end its own statements and not the text's.
const ROUTINE_PREFIXES = ['create function', 'create procedure'];
const ROUTINE_PREFIXES_REPLACED = ['create or replace function', 'create or replace procedure'];

function startsRoutine(words: readonly string[]): boolean {
  const start = words.join(' ');
  return ROUTINE_PREFIXES.includes(start) || ROUTINE_PREFIXES_REPLACED.includes(start);
}

/**
 * The leading words (at most three, lower-cased) of every statement of `text` that begins with a word, in
 * order: the statements a simple query runs one after the other. Empty statements are left out, and so
 * are statements that begin with something else (`(`, a quote), which are no transaction control; a
 * statement's words stop at the first token that is not one (`COMMIT;` has one word, `SELECT (` one).
 * @param backslashQuotes - Read `\` in a plain `'…'` string as an escape (`standard_conforming_strings`
 *   off) instead of as a character.
 */
export function statementWords(text: string, backslashQuotes: boolean): string[][] {
  const statements: string[][] = [];
  // The current statement's leading words, up to four (CREATE OR REPLACE FUNCTION), to see a routine's
  // body; `reading` while only words and white space have been seen in it.
  let words: string[] = [];
  let reading = true;
  let parenDepth = 0;
  // Inside a BEGIN ATOMIC body, and whether its last token (white space aside) was ATOMIC or a `;`, after
  // which an END ends it (see the module).
  let inBody = false;
  let bodyStatementStart = false;
  let previousWord: string | undefined;
  let i = 0;
  while (i < text.length) {
    const token = nextToken(text, i, backslashQuotes);
    const start = i;
    i = token.end;
    if (token.kind === 'space') continue;
    if (token.kind === 'semi' && inBody) {
      bodyStatementStart = true;
      continue;
    }
    if (token.kind === 'semi') {
      if (words.length > 0) statements.push(words.slice(0, WORDS));
      words = [];
      reading = true;
      parenDepth = 0;
      previousWord = undefined;
      continue;
    }
    const atBodyStatementStart = bodyStatementStart;
    bodyStatementStart = false;
    if (token.kind !== 'word') {
      reading = false;
      previousWord = undefined;
      if (token.kind === 'open') parenDepth++;
      else if (token.kind === 'close') parenDepth = Math.max(0, parenDepth - 1);
      continue;
    }
    const word = text.slice(start, token.end).toLowerCase();
    if (reading && words.length < 4) words.push(word);
    if (inBody) {
      if (word === 'end' && atBodyStatementStart) inBody = false;
    } else if (
      word === 'atomic' &&
      previousWord === 'begin' &&
      parenDepth === 0 &&
      (startsRoutine(words.slice(0, 2)) || startsRoutine(words))
    ) {
      inBody = true;
      bodyStatementStart = true;
    }
    previousWord = word;
  }
  if (words.length > 0) statements.push(words.slice(0, WORDS));
  return statements;
}
