/**
 * Command-line parsing for `idempotency-kit` (node:util `parseArgs`, no dependency). Pure: it turns argv
 * into a command or throws a {@link UsageError}, so it is unit-tested without I/O.
 * @module
 */
import { parseArgs } from 'node:util';

/** Exit codes of the CLI. */
export const ExitCode = {
  /** The command succeeded. */
  Ok: 0,
  /** The command ran and failed (database unreachable, SQL error). */
  Failure: 1,
  /** The command line was wrong; nothing ran. */
  Usage: 2,
} as const;

/** Bad command line: the message says what is wrong, the CLI prints it with a pointer to `--help`. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Settings every database command shares. */
export interface DatabaseArgs {
  /** Connection string; from `--database-url` or `$DATABASE_URL`. */
  databaseUrl: string;
  /** `--schema`, when given. */
  schema?: string;
  /** `--table`, when given. */
  table?: string;
}

/** A parsed command line. */
export type CliCommand =
  | { command: 'help' }
  | ({ command: 'migrate' } & DatabaseArgs)
  | ({ command: 'purge'; limit: number; batches: number } & DatabaseArgs)
  | ({ command: 'inspect'; storageKey: string; json: boolean } & DatabaseArgs)
  | ({ command: 'stats'; json: boolean } & DatabaseArgs);

const COMMANDS = ['migrate', 'purge', 'inspect', 'stats'] as const;

/** The text `--help` prints. */
export const HELP = `Usage: idempotency-kit <command> [options]

Commands:
  migrate          Create or upgrade the PostgreSQL records table (safe to run from several processes at once)
  purge            Delete expired records in bounded batches (never a live lease)
  inspect <key>    Show a storage key's record and what the next request with that key meets (the key is
                   the 64-hex-digit storage key: a trace's idempotency.key_hash, or storageKeyFor())
  stats            Count records by state, and the age of the oldest live lease

Options:
  --database-url <url>  PostgreSQL connection string (default: $DATABASE_URL)
  --schema <name>       Schema of the records table (default: public)
  --table <name>        Name of the records table (default: idempotency_records)
  --limit <n>           purge: rows deleted per batch (default: 1000)
  --batches <n>         purge: stop after this many batches (default: until nothing is left)
  --json                inspect, stats: print one JSON object instead of text
  -h, --help            Show this help

Exit codes: 0 success, 1 the command failed, 2 bad command line.
`;

function positiveInteger(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^[1-9][0-9]*$/.test(value) || !Number.isSafeInteger(Number(value))) {
    throw new UsageError(`--${name} must be a positive integer, got '${value}'`);
  }
  return Number(value);
}

/**
 * Parse `argv` (without the node and script paths).
 * @param environment - Where `DATABASE_URL` is read from.
 * @throws UsageError for an unknown command or option, a missing value or a bad number.
 */
export function parseCli(
  argv: readonly string[],
  environment: Record<string, string | undefined> = process.env,
): CliCommand {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help === true) return { command: 'help' };
  const [command, ...rest] = positionals;
  const expected = `${COMMANDS.slice(0, -1).join(', ')} or ${COMMANDS.at(-1)}`;
  if (command === undefined) throw new UsageError(`missing command (${expected})`);
  if (!(COMMANDS as readonly string[]).includes(command)) {
    throw new UsageError(`unknown command '${command}' (expected ${expected})`);
  }
  // `inspect` takes the storage key; no command takes anything else.
  const [storageKey, ...extra] = command === 'inspect' ? rest : [undefined, ...rest];
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra[0]}'`);
  if (command === 'inspect' && (storageKey === undefined || storageKey === '')) {
    throw new UsageError('inspect needs the storage key to show (idempotency-kit inspect <key>)');
  }
  const databaseUrl = values['database-url'] ?? environment.DATABASE_URL;
  if (databaseUrl === undefined || databaseUrl === '') {
    throw new UsageError('missing --database-url (or set DATABASE_URL)');
  }
  const database: DatabaseArgs = { databaseUrl };
  if (values.schema !== undefined) database.schema = values.schema;
  if (values.table !== undefined) database.table = values.table;
  if (command !== 'purge' && (values.limit !== undefined || values.batches !== undefined)) {
    throw new UsageError('--limit and --batches apply to purge only');
  }
  if (command !== 'inspect' && command !== 'stats' && values.json === true) {
    throw new UsageError('--json applies to inspect and stats only');
  }
  const json = values.json === true;
  if (command === 'migrate') return { command, ...database };
  if (command === 'inspect')
    return { command, ...database, storageKey: storageKey as string, json };
  if (command === 'stats') return { command, ...database, json };
  return {
    command: 'purge',
    ...database,
    limit: positiveInteger('limit', values.limit, 1000),
    batches: positiveInteger('batches', values.batches, Number.MAX_SAFE_INTEGER),
  };
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      'database-url': { type: 'string' },
      schema: { type: 'string' },
      table: { type: 'string' },
      limit: { type: 'string' },
      batches: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}
