/**
 * Command-line parsing for `idempotency-kit` (node:util `parseArgs`, no dependency). Pure: it turns argv
 * into a command or throws a {@link UsageError}, so it is unit-tested without I/O.
 * @module
 */
import { parseArgs } from 'node:util';
import { type Duration, MAX_TIMER_MS, toMs } from '../core/duration.js';
import { type InspectTarget, inspectTarget } from './inspect-target.js';
import { UsageError } from './parse-errors.js';

/** Exit codes of the CLI. */
export const ExitCode = {
  /** The command succeeded. */
  Ok: 0,
  /** The command ran and failed (database unreachable, SQL error). */
  Failure: 1,
  /** The command line was wrong; nothing ran. */
  Usage: 2,
} as const;

export { UsageError } from './parse-errors.js';

/**
 * The store a command works on: exactly one of `databaseUrl` (PostgreSQL: `--database-url`, or
 * `$DATABASE_URL` when no other store is named), `sqliteFile` (`--sqlite`) and `redisUrl` (`--redis-url`).
 */
export interface DatabaseArgs {
  /** PostgreSQL connection string. */
  databaseUrl?: string;
  /** SQLite database file. */
  sqliteFile?: string;
  /** Redis URL (node-redis syntax, `redis://host:6379/0`). */
  redisUrl?: string;
  /** `--schema` (PostgreSQL), when given. */
  schema?: string;
  /** `--table` (PostgreSQL, SQLite), when given. */
  table?: string;
  /** `--prefix` (Redis), when given. */
  prefix?: string;
  /** `--redis-cluster`: `redisUrl` is one node of a Redis Cluster, from which the others are found. */
  redisCluster?: boolean;
  /** `--redis-client`: the Redis client library to connect with (default: node-redis if installed). */
  redisClient?: RedisClientLibrary;
  /**
   * `--timeout`, in ms, when given: how long to wait for the store (PostgreSQL, Redis) to accept the
   * connection, and for `health` then for the probe ({@link DEFAULT_CONNECT_TIMEOUT_MS},
   * {@link DEFAULT_HEALTH_TIMEOUT_MS}).
   */
  timeoutMs?: number;
  /**
   * `--statement-timeout`, in ms, when given: how long a PostgreSQL statement may go unanswered before the
   * command gives up on it ({@link DEFAULT_STATEMENT_TIMEOUT_MS}; `migrate`: no bound unless given).
   */
  statementTimeoutMs?: number;
}

/** How long a command waits for PostgreSQL or Redis to accept its connection, without `--timeout`. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/**
 * How long `purge`, `inspect`, `stats` and `list` wait for a PostgreSQL statement's answer, without
 * `--statement-timeout`: a server that goes silent mid-command (a partition, a frozen primary) is given up
 * on, not waited for forever. Far above any one statement of theirs: a purge batch, or `stats`' full scan.
 */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 60_000;

/** How long `health` waits to connect, and then for the probe, without `--timeout`. */
export const DEFAULT_HEALTH_TIMEOUT_MS = 2_000;

/** The Redis client libraries the CLI can connect with (the store works with both). */
export const REDIS_CLIENT_LIBRARIES = ['node-redis', 'ioredis'] as const;

/** One of {@link REDIS_CLIENT_LIBRARIES}. */
export type RedisClientLibrary = (typeof REDIS_CLIENT_LIBRARIES)[number];

/** A parsed command line. */
export type CliCommand =
  | { command: 'help'; topic?: CliCommandName }
  | ({
      command: 'migrate';
      /** `--lock-timeout`, in ms, when given: `migrate()`'s `lockTimeoutMs` (PostgreSQL). */
      lockTimeoutMs?: number;
      /** `--lock-retries`, when given: `migrate()`'s `lockRetries` (PostgreSQL). */
      lockRetries?: number;
    } & DatabaseArgs)
  | ({
      command: 'purge';
      limit: number;
      batches: number;
      /** `--quiet`: no progress lines on stderr. */
      quiet?: true;
      /** `--progress-interval`, in ms, when given. */
      progressIntervalMs?: number;
    } & DatabaseArgs)
  | ({ command: 'inspect'; json: boolean } & InspectTarget & DatabaseArgs)
  | ({ command: 'stats'; json: boolean } & DatabaseArgs)
  | ({ command: 'health'; json: boolean } & DatabaseArgs)
  | ({
      command: 'list';
      crashed: true;
      limit: number;
      after?: string;
      json: boolean;
    } & DatabaseArgs);

/** The CLI's commands (besides `help`). */
export const CLI_COMMANDS = ['migrate', 'purge', 'inspect', 'stats', 'list', 'health'] as const;

/** One of {@link CLI_COMMANDS}. */
export type CliCommandName = (typeof CLI_COMMANDS)[number];

/** Keys per page of `list --crashed` when `--limit` is not given. */
export const DEFAULT_LIST_LIMIT = 100;

function positiveInteger(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^[1-9][0-9]*$/.test(value) || !Number.isSafeInteger(Number(value))) {
    throw new UsageError(`--${name} must be a positive integer, got '${value}'`);
  }
  return Number(value);
}

function duration(name: string, value: string): number {
  // A bare number is milliseconds, as everywhere durations are taken.
  const text = /^[0-9]+(\.[0-9]+)?$/.test(value) ? Number(value) : (value as Duration);
  let ms: number;
  try {
    ms = toMs(text, `--${name}`);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  // The bound is a Node timer, which fires at once past 2^31-1 ms: every wait would fail immediately (and
  // a connection attempt given the same bound could keep the process alive).
  if (ms > MAX_TIMER_MS) {
    throw new UsageError(`--${name}: must be at most 24 days (${MAX_TIMER_MS} ms), got '${value}'`);
  }
  return ms;
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
  const expected = `${CLI_COMMANDS.slice(0, -1).join(', ')} or ${CLI_COMMANDS.at(-1)}`;
  const known = (command: string): command is CliCommandName =>
    (CLI_COMMANDS as readonly string[]).includes(command);
  // `help` as a command is what many CLIs take (git, npm): like `--help`, it wins over anything else given.
  // After a command (`purge --help`, `help purge`) it is that command's help; an unknown one is the same
  // usage error as without --help, not the global help, which would hide the typo.
  if (values.help === true || positionals[0] === 'help') {
    const topic = positionals[0] === 'help' ? positionals[1] : positionals[0];
    if (topic === undefined || topic === 'help') return { command: 'help' };
    if (!known(topic)) throw new UsageError(`unknown command '${topic}' (expected ${expected})`);
    return { command: 'help', topic };
  }
  refuseRepeatedOptions(parsed.tokens);
  const [command, ...rest] = positionals;
  if (command === undefined) throw new UsageError(`missing command (${expected})`);
  if (!known(command)) {
    throw new UsageError(`unknown command '${command}' (expected ${expected})`);
  }
  // `inspect` takes the storage key; no command takes anything else.
  const [storageKey, ...extra] = command === 'inspect' ? rest : [undefined, ...rest];
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra[0]}'`);
  const { key, namespace, scope } = values;
  const http = values.http === true ? true : undefined;
  if (command !== 'inspect' && [key, namespace, scope].some((value) => value !== undefined)) {
    throw new UsageError('--key, --namespace and --scope apply to inspect only');
  }
  if (command !== 'inspect' && http !== undefined) {
    throw new UsageError('--http applies to inspect --key only');
  }
  const database = storeTarget(command, values, environment);
  if (command !== 'purge' && values.batches !== undefined) {
    throw new UsageError('--batches applies to purge only');
  }
  if (command !== 'purge' && (values.quiet === true || values['progress-interval'] !== undefined)) {
    throw new UsageError('--quiet and --progress-interval apply to purge only');
  }
  if (command !== 'purge' && command !== 'list' && values.limit !== undefined) {
    throw new UsageError('--limit applies to purge and list only');
  }
  const withJson = ['inspect', 'stats', 'list', 'health'];
  if (!withJson.includes(command) && values.json === true) {
    throw new UsageError('--json applies to inspect, stats, list and health only');
  }
  if (values.timeout !== undefined) database.timeoutMs = duration('timeout', values.timeout);
  if (values['statement-timeout'] !== undefined) {
    if (database.databaseUrl === undefined) {
      throw new UsageError('--statement-timeout applies to PostgreSQL only');
    }
    if (command === 'health') {
      throw new UsageError(
        '--statement-timeout does not apply to health: --timeout bounds its probe',
      );
    }
    database.statementTimeoutMs = duration('statement-timeout', values['statement-timeout']);
  }
  const json = values.json === true;
  if (command === 'list') return { command, ...database, ...listing(values), json };
  if (values.crashed === true || values.after !== undefined) {
    throw new UsageError('--crashed and --after apply to list only');
  }
  if (command === 'migrate') return { command, ...database, ...migrateLockWait(values, database) };
  if (values['lock-timeout'] !== undefined || values['lock-retries'] !== undefined) {
    throw new UsageError('--lock-timeout and --lock-retries apply to migrate only');
  }
  if (command === 'inspect') {
    return {
      command,
      ...database,
      ...inspectTarget(storageKey, { key, namespace, scope, http }),
      json,
    };
  }
  if (command === 'stats' || command === 'health') return { command, ...database, json };
  return {
    command: 'purge',
    ...database,
    limit: positiveInteger('limit', values.limit, 1000),
    batches: positiveInteger('batches', values.batches, Number.MAX_SAFE_INTEGER),
    ...progress(values),
  };
}

/**
 * `migrate`'s lock waits on PostgreSQL (`migrate()`'s `lockTimeoutMs` and `lockRetries`): `--lock-timeout`, a
 * duration, and `--lock-retries`, a whole number (0: no retry). Without them, `migrate()`'s
 * defaults (2 s, 4 retries).
 * @throws UsageError for a bad value, or either given for another store (SQLite's migration takes the
 * database's own lock, and waits per its busy timeout).
 */
function migrateLockWait(
  values: ReturnType<typeof parse>['values'],
  database: DatabaseArgs,
): { lockTimeoutMs?: number; lockRetries?: number } {
  const timeout = values['lock-timeout'];
  const retries = values['lock-retries'];
  if (timeout === undefined && retries === undefined) return {};
  if (database.databaseUrl === undefined) {
    throw new UsageError('--lock-timeout and --lock-retries apply to PostgreSQL only');
  }
  const wait: { lockTimeoutMs?: number; lockRetries?: number } = {};
  // A positive duration, rounded up to whole ms as lock_timeout takes it (0 would mean no bound there).
  if (timeout !== undefined) wait.lockTimeoutMs = duration('lock-timeout', timeout);
  if (retries !== undefined) {
    if (!/^(0|[1-9][0-9]*)$/.test(retries) || !Number.isSafeInteger(Number(retries))) {
      throw new UsageError(`--lock-retries must be a whole number (0: no retry), got '${retries}'`);
    }
    wait.lockRetries = Number(retries);
  }
  return wait;
}

/**
 * `purge`'s progress lines: `--quiet` silences them, `--progress-interval` sets how often they come.
 * @throws UsageError for both at once (one says never, the other how often) or a bad duration.
 */
function progress(values: ReturnType<typeof parse>['values']): {
  quiet?: true;
  progressIntervalMs?: number;
} {
  const interval = values['progress-interval'];
  if (values.quiet === true) {
    if (interval !== undefined) {
      throw new UsageError(
        '--quiet and --progress-interval: give one (--quiet prints no progress)',
      );
    }
    return { quiet: true };
  }
  return interval === undefined
    ? {}
    : { progressIntervalMs: duration('progress-interval', interval) };
}

/**
 * What `list` lists and which page: `--crashed` (the one listing there is, named so that others can come
 * without changing what `list` alone means), `--limit` keys per page, and `--after` the previous page's
 * `next`.
 * @throws UsageError without `--crashed`, for a bad `--limit` or an empty `--after`.
 */
function listing(values: ReturnType<typeof parse>['values']): {
  crashed: true;
  limit: number;
  after?: string;
} {
  if (values.crashed !== true) {
    throw new UsageError('list needs what to list: --crashed (idempotency-kit list --crashed)');
  }
  const limit = positiveInteger('limit', values.limit, DEFAULT_LIST_LIMIT);
  if (values.after === undefined) return { crashed: true, limit };
  if (values.after === '') throw new UsageError("--after needs a previous page's next");
  return { crashed: true, limit, after: values.after };
}

/**
 * The store the command names, checked against what the command and the options apply to.
 * @throws UsageError for no store or several, or an option of another store.
 */
function storeTarget(
  command: string,
  values: ReturnType<typeof parse>['values'],
  environment: Record<string, string | undefined>,
): DatabaseArgs {
  const named = [values['database-url'], values.sqlite, values['redis-url']].filter(
    (value) => value !== undefined,
  );
  if (named.length > 1) {
    throw new UsageError('give one store: --database-url, --sqlite or --redis-url');
  }
  if (values.sqlite === '' || values['redis-url'] === '') {
    throw new UsageError('--sqlite and --redis-url need a value');
  }
  const target: DatabaseArgs = {};
  if (values.sqlite !== undefined) target.sqliteFile = values.sqlite;
  else if (values['redis-url'] !== undefined) target.redisUrl = values['redis-url'];
  else {
    const databaseUrl = values['database-url'] ?? environment.DATABASE_URL;
    if (databaseUrl === undefined || databaseUrl === '') {
      throw new UsageError('missing --database-url (or set DATABASE_URL), --sqlite or --redis-url');
    }
    target.databaseUrl = databaseUrl;
  }
  if (values.schema !== undefined) {
    if (target.databaseUrl === undefined)
      throw new UsageError('--schema applies to PostgreSQL only');
    target.schema = values.schema;
  }
  if (values.table !== undefined) {
    if (target.redisUrl !== undefined) {
      throw new UsageError('--table applies to PostgreSQL and SQLite (Redis has --prefix)');
    }
    target.table = values.table;
  }
  if (values.prefix !== undefined) {
    if (target.redisUrl === undefined) throw new UsageError('--prefix applies to Redis only');
    target.prefix = values.prefix;
  }
  if (values['redis-cluster'] === true) {
    if (target.redisUrl === undefined)
      throw new UsageError('--redis-cluster applies to Redis only');
    target.redisCluster = true;
  }
  const library = values['redis-client'];
  if (library !== undefined) {
    if (target.redisUrl === undefined) throw new UsageError('--redis-client applies to Redis only');
    if (!(REDIS_CLIENT_LIBRARIES as readonly string[]).includes(library)) {
      throw new UsageError(`--redis-client must be node-redis or ioredis, got '${library}'`);
    }
    target.redisClient = library as RedisClientLibrary;
  }
  if (target.redisUrl !== undefined && (command === 'migrate' || command === 'purge')) {
    throw new UsageError(
      `${command} does not apply to Redis: its records expire by themselves, and it has no table`,
    );
  }
  return target;
}

// An option given twice (`--schema billing --schema public`) is a slip, often a wrapper script's default
// followed by the operator's value: parseArgs would keep the last one in silence, and `purge` or `migrate`
// would then run on a table the operator did not name.
function refuseRepeatedOptions(tokens: ReadonlyArray<{ kind: string; name?: string }>): void {
  const seen = new Set<string>();
  for (const token of tokens) {
    if (token.kind !== 'option' || token.name === undefined) continue;
    if (seen.has(token.name)) throw new UsageError(`--${token.name} is given more than once`);
    seen.add(token.name);
  }
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    tokens: true,
    options: {
      'database-url': { type: 'string' },
      sqlite: { type: 'string' },
      'redis-url': { type: 'string' },
      prefix: { type: 'string' },
      'redis-cluster': { type: 'boolean' },
      'redis-client': { type: 'string' },
      schema: { type: 'string' },
      table: { type: 'string' },
      limit: { type: 'string' },
      batches: { type: 'string' },
      crashed: { type: 'boolean' },
      after: { type: 'string' },
      json: { type: 'boolean' },
      timeout: { type: 'string' },
      key: { type: 'string' },
      namespace: { type: 'string' },
      scope: { type: 'string' },
      http: { type: 'boolean' },
      'statement-timeout': { type: 'string' },
      'lock-timeout': { type: 'string' },
      'lock-retries': { type: 'string' },
      quiet: { type: 'boolean', short: 'q' },
      'progress-interval': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}
