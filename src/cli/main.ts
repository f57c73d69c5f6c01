#!/usr/bin/env node
/**
 * The `idempotency-kit` executable (the package's `bin`): `migrate`, `purge`, `inspect`, `stats` and
 * `list --crashed` for the PostgreSQL, SQLite and Redis stores.
 * Run `idempotency-kit --help` for usage.
 * @module
 */
import { ExitCode } from './args.js';
import { runCli } from './run.js';

runCli(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`idempotency-kit: unexpected error: ${String(error)}\n`);
    process.exitCode = ExitCode.Failure;
  },
);
