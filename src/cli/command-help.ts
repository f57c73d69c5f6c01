/**
 * The help of one command (`idempotency-kit purge --help`, `idempotency-kit help purge`): its usage, the
 * options it takes and an example. The global help (`HELP` in `global-help.ts`) lists every command and
 * every option at once, its command list made from the entries here ({@link commandList}); an operator
 * about to run one command wants only what applies to it.
 * @module
 */
import {
  CLI_COMMANDS,
  type CliCommandName,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_HEALTH_TIMEOUT_MS,
  DEFAULT_LIST_LIMIT,
  DEFAULT_STATEMENT_TIMEOUT_MS,
} from './args.js';
import { DEFAULT_PROGRESS_INTERVAL_MS } from './purge-progress.js';

/** One option as a command's help shows it: `--limit <n>` and what it does for that command. */
type OptionLine = readonly [flag: string, meaning: string];

/** One entry of the global help's command list: how the command is called, and what it does. */
type ListingLine = readonly [call: string, meaning: string];

/** What a command's help says. */
interface CommandHelpText {
  /** Its entries in the global help's command list (two for `inspect`'s two forms). */
  listing: readonly ListingLine[];
  /** The usage lines, after `idempotency-kit `. */
  usage: readonly string[];
  /** What the command does, a few lines. */
  summary: string;
  /** The options it takes, in the order shown. */
  options: readonly OptionLine[];
  /** Command lines to copy, after `idempotency-kit `. */
  examples: readonly string[];
}

const postgres: OptionLine = [
  '--database-url <url>',
  'PostgreSQL connection string (default: $DATABASE_URL)',
];
const schema: OptionLine = [
  '--schema <name>',
  'PostgreSQL: schema of the records table (default: public)',
];
const table: OptionLine = [
  '--table <name>',
  'PostgreSQL, SQLite: name of the records table (default: idempotency_records)',
];
const redis: readonly OptionLine[] = [
  ['--redis-url <url>', 'Redis URL, e.g. redis://127.0.0.1:6379 (redis:// or rediss://)'],
  ['--prefix <prefix>', "Redis: the store's key prefix (default: idem:)"],
  ['--redis-cluster', 'Redis: --redis-url is one node of a Redis Cluster (the others are found)'],
  [
    '--redis-client <lib>',
    'Redis: node-redis or ioredis (default: node-redis if installed, else ioredis)',
  ],
];
const timeout: OptionLine = [
  '--timeout <duration>',
  `PostgreSQL, Redis: how long to wait for the connection, e.g. 500ms or 5s\n(default: ${DEFAULT_CONNECT_TIMEOUT_MS / 1000}s)`,
];
const statementTimeout: OptionLine = [
  '--statement-timeout <duration>',
  `PostgreSQL: how long one statement may go unanswered before the command gives up\n(default: ${DEFAULT_STATEMENT_TIMEOUT_MS / 1000}s)`,
];
const json: OptionLine = ['--json', 'Print one JSON object instead of text'];
const help: OptionLine = ['-h, --help', 'Show this help'];

/** The options of the read commands (`inspect`, `stats`, `list`): every store. */
const readStore: readonly OptionLine[] = [
  postgres,
  ['--sqlite <file>', 'SQLite database file (must exist: a read never creates it)'],
  ...redis,
  schema,
  table,
];

/** Each command's help, by name. */
const TEXTS: Readonly<Record<CliCommandName, CommandHelpText>> = {
  migrate: {
    listing: [
      [
        'migrate',
        'Create or upgrade the records table (PostgreSQL, SQLite; safe from several processes at once)',
      ],
    ],
    usage: ['migrate (--database-url <url> | --sqlite <file>) [options]'],
    summary:
      'Create or upgrade the records table: applies the pending migrations in one transaction (PostgreSQL:\n' +
      'under an advisory lock, creating the schema if needed; SQLite: creating the file if needed). Safe from\n' +
      'several processes at once: only one applies. PostgreSQL: a migration waits at most 2 s for a lock the\n' +
      "application's transactions hold (the store's calls behind it fail after 100 ms), then retries; it\n" +
      'fails, naming the holder, after 5 attempts (--lock-timeout, --lock-retries). A table a newer release\n' +
      'migrated further is left as it is, with a warning on stderr (exit 0). Redis has no table and needs\n' +
      'no migration.',
    options: [
      postgres,
      ['--sqlite <file>', 'SQLite database file (created if needed)'],
      schema,
      table,
      timeout,
      [
        '--statement-timeout <duration>',
        'PostgreSQL: how long one statement may go unanswered (default: no bound, as\na migration may take long; its lock waits are bounded on their own)',
      ],
      [
        '--lock-timeout <duration>',
        'PostgreSQL: how long a migration waits for a lock before it rolls back, lets\nthe claims through and tries again (default: 2s)',
      ],
      [
        '--lock-retries <n>',
        'PostgreSQL: how many times it tries again, after a pause that doubles\n(default: 4; 0: fail at the first timeout)',
      ],
      help,
    ],
    examples: [
      'migrate --database-url "$DATABASE_URL" --schema billing',
      'migrate --sqlite ./idempotency.db',
    ],
  },
  purge: {
    listing: [
      [
        'purge',
        'Delete expired records in bounded batches, never a live lease (PostgreSQL, SQLite)',
      ],
    ],
    usage: ['purge (--database-url <url> | --sqlite <file>) [options]'],
    summary:
      'Delete expired records (completed records past their retention, leases that expired without a\n' +
      'takeover) in batches of --limit rows, each its own short transaction, until a batch comes back short\n' +
      "or --batches ran. Never a live lease, nor a crashed request's reserved lease. Prints its progress on\n" +
      'stderr while it runs (on a terminal, or anywhere with --progress-interval) and the total on stdout\n' +
      'at the end; SIGINT or SIGTERM stops it between batches (exit 130 or 143, what it deleted is printed).',
    options: [
      postgres,
      ['--sqlite <file>', 'SQLite database file (must exist)'],
      schema,
      table,
      ['--limit <n>', 'Rows deleted per batch (default: 1000)'],
      ['--batches <n>', 'Stop after this many batches (default: until nothing is left)'],
      [
        '--progress-interval <duration>',
        `How often to print the progress (records deleted, rate) on stderr (default:\n${DEFAULT_PROGRESS_INTERVAL_MS / 1000}s on a terminal, none when stderr is a file or a pipe; given, also there)`,
      ],
      ['-q, --quiet', 'Print no progress (the result line on stdout stays)'],
      timeout,
      statementTimeout,
      help,
    ],
    examples: ['purge --database-url "$DATABASE_URL" --limit 5000'],
  },
  inspect: {
    listing: [
      [
        'inspect <key>',
        "Show a storage key's record and what the next request with that key meets (the key is\n" +
          "the 64-hex-digit storage key: a trace's idempotency.key_hash, or storageKeyFor())",
      ],
      [
        'inspect --key <client key> [--namespace <ns>] [--scope <scope>]',
        "The same, for the record the engine keeps for a client's own key (Idempotency-Key, a\n" +
          'message id) in that namespace (default: default) and scope (default: empty)',
      ],
    ],
    usage: [
      'inspect <storage key> [options]',
      'inspect --key <client key> [--namespace <ns>] [--scope <scope>] [--http] [options]',
    ],
    summary:
      "Show one key's record and what the next request with that key meets (one read; nothing changes).\n" +
      "The storage key is the engine's 64-hex-digit hash (a trace's idempotency.key_hash, storageKeyFor());\n" +
      "--key takes the client's own key (an Idempotency-Key, a message id) and hashes it as the engine does.",
    options: [
      ...readStore,
      [
        '--key <client key>',
        "The client's key, hashed with --namespace and --scope as the engine does",
      ],
      ['--namespace <ns>', "With --key: the engine's namespace (default: default)"],
      [
        '--scope <scope>',
        "With --key: the request's scope (default: empty; HTTP's default scope is a\ndigest of the request's credentials, a consumer's is consumer:<name>)",
      ],
      [
        '--http',
        "With --key: the scope is an HTTP route's, not a consumer's (one starting consumer:,\nhanded-back: or dead-letter: is keyed apart from those components' records)",
      ],
      json,
      timeout,
      statementTimeout,
      help,
    ],
    examples: [
      'inspect 3f9a6c0e57d1b2a48e0c9f1d2b3a4c5d6e7f8091a2b3c4d5e6f708192a3b4ce1 --sqlite ./idempotency.db',
      'inspect --key order-42 --namespace payments --scope user_1234 --database-url "$DATABASE_URL"',
      'inspect --key order-42 --namespace payments --scope consumer:acme --http --sqlite ./idempotency.db',
    ],
  },
  stats: {
    listing: [['stats', 'Count records by state, and the age of the oldest live lease']],
    usage: ['stats [options]'],
    summary:
      'Count the records by state, and the age of the oldest live lease (one aggregate query on SQL; on\n' +
      'Redis a SCAN of the prefix).',
    options: [...readStore, json, timeout, statementTimeout, help],
    examples: ['stats --redis-url redis://127.0.0.1:6379 --prefix orders:'],
  },
  list: {
    listing: [
      [
        'list --crashed',
        'List the keys whose request crashed and that stay reserved for it (another request\n' +
          'gets 422), a page of --limit at a time, each explained as inspect does',
      ],
    ],
    usage: ['list --crashed [--limit <n>] [--after <next>] [options]'],
    summary:
      'List the keys whose request crashed and that stay reserved for it (another request gets 422), a\n' +
      'page at a time, each explained as inspect explains it; the last line says how to get the next page.',
    options: [
      ...readStore,
      ['--crashed', 'List the crashed keys (required: the one listing there is)'],
      ['--limit <n>', `Keys per page (default: ${DEFAULT_LIST_LIMIT})`],
      [
        '--after <next>',
        "The page after the one that printed this 'next' (PostgreSQL, SQLite: any key;\nRedis: a SCAN position)",
      ],
      json,
      timeout,
      statementTimeout,
      help,
    ],
    examples: ['list --crashed --database-url "$DATABASE_URL" --limit 50'],
  },
  health: {
    listing: [
      [
        'health',
        'Connect and read one key no request can have, each within --timeout: exit 0 when\n' +
          'the store answered (a readiness check for the processes that use it), 1 when not',
      ],
    ],
    usage: ['health [options]'],
    summary:
      'Connect and read one key no request can have, each within --timeout: exit 0 when the store answered\n' +
      '(a readiness check for the processes that use it), 1 when not, with the reason on stdout.',
    options: [
      ...readStore,
      json,
      [
        '--timeout <duration>',
        `How long to wait for the connection, then for the probe (default: ${DEFAULT_HEALTH_TIMEOUT_MS / 1000}s)`,
      ],
      help,
    ],
    examples: ['health --redis-url "$REDIS_URL" --timeout 1s'],
  },
};

// The global help's column: options padded to it, longer ones on a line of their own.
const COLUMN = 24;

function optionLines([flag, meaning]: OptionLine): string {
  const [first = '', ...rest] = meaning.split('\n');
  const head =
    flag.length <= COLUMN - 4
      ? `  ${flag.padEnd(COLUMN - 2)}${first}`
      : `  ${flag}\n${' '.repeat(COLUMN)}${first}`;
  return [head, ...rest.map((line) => `${' '.repeat(COLUMN)}${line}`)].join('\n');
}

// The global help's command column: calls padded to it, longer ones on a line of their own.
const COMMAND_COLUMN = 19;

function listingLines([call, meaning]: ListingLine): string {
  const [first = '', ...rest] = meaning.split('\n');
  const head =
    call.length <= COMMAND_COLUMN - 4
      ? `  ${call.padEnd(COMMAND_COLUMN - 2)}${first}`
      : `  ${call}\n${' '.repeat(COMMAND_COLUMN)}${first}`;
  return [head, ...rest.map((line) => `${' '.repeat(COMMAND_COLUMN)}${line}`)].join('\n');
}

/**
 * The global help's command list: every command's {@link CommandHelpText.listing}, in the order of
 * `CLI_COMMANDS`, so that it cannot drift from the commands the parser takes and the helps describe.
 */
export function commandList(): string {
  return CLI_COMMANDS.flatMap((command) => TEXTS[command].listing.map(listingLines)).join('\n');
}

/** The help `idempotency-kit <command> --help` prints: usage, what it does, its options, an example. */
export function commandHelp(command: CliCommandName): string {
  const text = TEXTS[command];
  const [first, ...others] = text.usage;
  return [
    `Usage: idempotency-kit ${first}`,
    ...others.map((usage) => `       idempotency-kit ${usage}`),
    '',
    text.summary,
    '',
    'Options:',
    ...text.options.map(optionLines),
    '',
    `Example${text.examples.length === 1 ? '' : 's'}:`,
    ...text.examples.map((example) => `  idempotency-kit ${example}`),
    '',
    "Run 'idempotency-kit --help' for every command and the exit codes.",
    '',
  ].join('\n');
}

/** The option flags a command's help lists (`--limit`, `--help`…), for the tests that keep them true. */
export function commandHelpFlags(command: CliCommandName): string[] {
  return TEXTS[command].options.flatMap(([flag]) =>
    flag.split(', ').map((name) => name.split(' ')[0] as string),
  );
}
