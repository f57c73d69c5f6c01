/**
 * The help of one command (`idempotency-kit purge --help`, `idempotency-kit help purge`): its usage, the
 * options it takes and an example. The global help (`HELP` in `args.ts`) lists every command and every
 * option at once; an operator about to run one command wants only what applies to it.
 * @module
 */
import {
  type CliCommandName,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_HEALTH_TIMEOUT_MS,
  DEFAULT_LIST_LIMIT,
  DEFAULT_STATEMENT_TIMEOUT_MS,
} from './args.js';
import { DEFAULT_PROGRESS_INTERVAL_MS } from './purge-progress.js';

/** One option as a command's help shows it: `--limit <n>` and what it does for that command. */
type OptionLine = readonly [flag: string, meaning: string];

/** What a command's help says. */
interface CommandHelpText {
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
    usage: ['migrate (--database-url <url> | --sqlite <file>) [options]'],
    summary:
      'Create or upgrade the records table: applies the pending migrations in one transaction (PostgreSQL:\n' +
      'under an advisory lock, creating the schema if needed; SQLite: creating the file if needed). Safe from\n' +
      'several processes at once: only one applies. Redis has no table and needs no migration.',
    options: [
      postgres,
      ['--sqlite <file>', 'SQLite database file (created if needed)'],
      schema,
      table,
      timeout,
      [
        '--statement-timeout <duration>',
        "PostgreSQL: how long one statement may go unanswered (default: no bound, as\nmigrate may wait for the locks of the application's transactions)",
      ],
      help,
    ],
    examples: [
      'migrate --database-url "$DATABASE_URL" --schema billing',
      'migrate --sqlite ./idempotency.db',
    ],
  },
  purge: {
    usage: ['purge (--database-url <url> | --sqlite <file>) [options]'],
    summary:
      'Delete expired records (completed records past their retention, leases that expired without a\n' +
      'takeover) in batches of --limit rows, each its own short transaction, until a batch comes back short\n' +
      "or --batches ran. Never a live lease, nor a crashed request's reserved lease. Prints its progress on\n" +
      'stderr while it runs and the total on stdout at the end; SIGINT or SIGTERM stops it between batches\n' +
      '(exit 130 or 143, what it deleted is printed).',
    options: [
      postgres,
      ['--sqlite <file>', 'SQLite database file (must exist)'],
      schema,
      table,
      ['--limit <n>', 'Rows deleted per batch (default: 1000)'],
      ['--batches <n>', 'Stop after this many batches (default: until nothing is left)'],
      [
        '--progress-interval <duration>',
        `How often to print the progress (records deleted, rate) on stderr (default: ${DEFAULT_PROGRESS_INTERVAL_MS / 1000}s)`,
      ],
      ['-q, --quiet', 'Print no progress (the result line on stdout stays)'],
      timeout,
      statementTimeout,
      help,
    ],
    examples: ['purge --database-url "$DATABASE_URL" --limit 5000'],
  },
  inspect: {
    usage: [
      'inspect <storage key> [options]',
      'inspect --key <client key> [--namespace <ns>] [--scope <scope>] [options]',
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
      json,
      timeout,
      statementTimeout,
      help,
    ],
    examples: [
      'inspect 3f9a6c0e57d1b2a48e0c9f1d2b3a4c5d6e7f8091a2b3c4d5e6f708192a3b4ce1 --sqlite ./idempotency.db',
      'inspect --key order-42 --namespace payments --scope user_1234 --database-url "$DATABASE_URL"',
    ],
  },
  stats: {
    usage: ['stats [options]'],
    summary:
      'Count the records by state, and the age of the oldest live lease (one aggregate query on SQL; on\n' +
      'Redis a SCAN of the prefix).',
    options: [...readStore, json, timeout, statementTimeout, help],
    examples: ['stats --redis-url redis://127.0.0.1:6379 --prefix orders:'],
  },
  list: {
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
