/**
 * The global help (`idempotency-kit --help`, `help`): every command and every option at once, and the exit
 * codes. Its command list is made from each command's own help text (`command-help.ts`), so that a
 * command added there, or a line changed, shows here too; its options are the union of the commands'
 * (a test keeps them so). A file of its own because `command-help.ts` reads the parser's defaults from
 * `args.ts`: the help there would make the two modules import each other.
 * @module
 */
import {
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_HEALTH_TIMEOUT_MS,
  DEFAULT_LIST_LIMIT,
  DEFAULT_STATEMENT_TIMEOUT_MS,
} from './args.js';
import { commandList } from './command-help.js';
import { DEFAULT_PROGRESS_INTERVAL_MS } from './purge-progress.js';

/** The text `--help` (or the `help` command) prints. */
export const HELP = `Usage: idempotency-kit <command> [options]
       idempotency-kit help

Commands:
${commandList()}

The store (one of):
  --database-url <url>  PostgreSQL connection string (default: $DATABASE_URL)
  --sqlite <file>       SQLite database file
  --redis-url <url>     Redis URL, e.g. redis://127.0.0.1:6379 (inspect, stats, list and health: Redis
                        expires records by itself and needs no migration)

Options:
  --schema <name>       PostgreSQL: schema of the records table (default: public)
  --table <name>        PostgreSQL, SQLite: name of the records table (default: idempotency_records)
  --prefix <prefix>     Redis: the store's key prefix (default: idem:)
  --redis-cluster       Redis: --redis-url is one node of a Redis Cluster (the others are discovered;
                        stats and list walk every master)
  --redis-client <lib>  Redis: node-redis or ioredis (default: node-redis if installed, else ioredis)
  --limit <n>           purge: rows deleted per batch (default: 1000); list: keys per page (default: ${DEFAULT_LIST_LIMIT})
  --batches <n>         purge: stop after this many batches (default: until nothing is left)
  --progress-interval <duration>
                        purge: how often to print its progress on stderr (default: ${DEFAULT_PROGRESS_INTERVAL_MS / 1000}s on a
                        terminal, none when stderr is a file or a pipe; given, also there)
  -q, --quiet           purge: print no progress (the result line on stdout stays)
  --crashed             list: the crashed keys (the one listing there is)
  --after <next>        list: the page after the one that printed this 'next' (on PostgreSQL and SQLite,
                        any key: the page starts after it)
  --timeout <duration>  PostgreSQL, Redis: how long to wait for the connection, e.g. 500ms or 5s (default:
                        ${DEFAULT_CONNECT_TIMEOUT_MS / 1000}s); health: for the connection, then for the probe (default: ${DEFAULT_HEALTH_TIMEOUT_MS / 1000}s)
  --statement-timeout <duration>
                        PostgreSQL: how long one statement may go unanswered before the command gives up
                        (default: ${DEFAULT_STATEMENT_TIMEOUT_MS / 1000}s; migrate: no bound unless given, as it may wait for locks)
  --lock-timeout <duration>
                        migrate, PostgreSQL: how long a migration waits for a lock before it rolls back and
                        tries again (default: 2s)
  --lock-retries <n>    migrate, PostgreSQL: how many times it tries again (default: 4; 0: none)
  --key <client key>    inspect: the client's key, hashed with --namespace and --scope as the engine does
  --namespace <ns>      inspect --key: the engine's namespace (default: default)
  --scope <scope>       inspect --key: the request's scope (default: empty; HTTP's default scope is a digest
                        of the request's credentials, consumers' is consumer:<name>)
  --http                inspect --key: the scope is an HTTP route's (one starting consumer:, handed-back:
                        or dead-letter: is keyed apart from those components' records)
  --json                inspect, stats, list, health: print one JSON object instead of text
  -h, --help            Show this help (so does the command help); after a command (purge --help, or
                        help purge), that command's usage, options and an example

Exit codes: 0 success, 1 the command failed, 2 bad command line, 130/143 purge stopped by
SIGINT/SIGTERM between batches (what it deleted is printed).
`;
