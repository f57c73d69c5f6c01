/**
 * The error of a wrong command line, shared by the parsing modules (`args.ts` re-exports it).
 * @module
 */

/** Bad command line: the message says what is wrong, the CLI prints it with a pointer to `--help`. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
