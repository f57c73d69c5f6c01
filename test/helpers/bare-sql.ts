/**
 * SQL text reduced to its statements: no comments, blank lines or indentation, so that tests can compare
 * what two files really send (a generated statement against a migration's copy, say).
 * @module
 */

/** A statement as SQL, without comments, blank lines and indentation. */
export const bareSql = (text: string): string =>
  text
    .split('\n')
    .map((line) => line.replace(/--.*$/, '').trim())
    .filter((line) => line !== '')
    .join('\n');
