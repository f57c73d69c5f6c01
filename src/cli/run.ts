/**
 * The CLI's driver: parse, open the store the command line names (through the user's installed driver,
 * loaded at run time), run the command, and map the result to an exit code. The rest of the package
 * never depends on the drivers.
 * @module
 */
import { isIdempotencyError, isStoreUnavailableError } from '../core/errors.js';
import type { Store } from '../store/store.js';
import {
  type CliCommand,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_HEALTH_TIMEOUT_MS,
  DEFAULT_STATEMENT_TIMEOUT_MS,
  ExitCode,
  parseCli,
  UsageError,
} from './args.js';
import { commandHelp } from './command-help.js';
import {
  inspectCommand,
  listCrashedCommand,
  migrateCommand,
  migrateSqliteCommand,
  type Print,
  purgeCommand,
  statsCommand,
} from './commands.js';
import { HELP } from './global-help.js';
import { healthCommand } from './health-command.js';
import { type Output, output } from './output.js';
import { progressIntervalMs, purgeProgress, SILENT_PROGRESS } from './purge-progress.js';
import { openRedis } from './redis-target.js';
import { listenForStop, signalExitCode } from './stop-signals.js';
import {
  causeChain,
  type OpenTarget,
  openPostgres,
  openSqlite,
  requireSqliteDriver,
  targetLabel,
} from './targets.js';

/**
 * Open the store `command` names (parsing made sure it names exactly one), waiting at most
 * `connectTimeoutMs` for a server to accept the connection.
 */
function open(
  command: Exclude<CliCommand, { command: 'help' }>,
  connectTimeoutMs: number,
): Promise<OpenTarget> | OpenTarget {
  if (command.sqliteFile !== undefined) return openSqlite(command.sqliteFile, command);
  if (command.redisUrl !== undefined) return openRedis(command.redisUrl, command, connectTimeoutMs);
  return openPostgres(
    command.databaseUrl as string,
    command,
    connectTimeoutMs,
    statementTimeout(command),
  );
}

/**
 * How long a PostgreSQL statement of `command` may go unanswered: `--statement-timeout`, else a generous
 * bound, except for `migrate`, whose statements may rightly wait for the locks of the application's
 * transactions. `health` stops waiting for its probe after `--timeout`; bounding the statement as well
 * discards the connection: a probe left unanswered kept it, and with it the process, alive forever after
 * the verdict.
 */
function statementTimeout(command: Exclude<CliCommand, { command: 'help' }>): number | undefined {
  // A little past the probe's own bound, so that the verdict is always the probe's `timeout`.
  if (command.command === 'health') return (command.timeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS) + 250;
  if (command.statementTimeoutMs !== undefined) return command.statementTimeoutMs;
  return command.command === 'migrate' ? undefined : DEFAULT_STATEMENT_TIMEOUT_MS;
}

/** The store's name as the stores call themselves, before one is open. */
function storeKind(command: Exclude<CliCommand, { command: 'help' }>): string {
  if (command.sqliteFile !== undefined) return 'sqlite';
  return command.redisUrl !== undefined ? 'redis' : 'postgres';
}

/**
 * The store stopped answering, or dropped the connection, after the command had connected and the store
 * had answered (a restart, a failover): told apart from a connection that failed and from an error the
 * store answered with, for the hint on what to do (see {@link hintFor}).
 */
class InterruptedCommandError extends Error {
  constructor(
    readonly target: string,
    cause: Error,
  ) {
    super(cause.message, { cause });
  }
}

/**
 * `purge`, stopping between batches at the first SIGINT or SIGTERM: what it deleted is printed, and the
 * exit code is the shells' for a command that signal stopped (130, 143). Ok once nothing is left.
 */
async function purgeUntilStopped(
  store: Store,
  args: { limit: number; batches: number; quiet?: true; progressIntervalMs?: number },
  print: Print,
  stderr: Output,
): Promise<number> {
  const stop = listenForStop();
  const intervalMs = progressIntervalMs(args, stderr.isTerminal);
  const progress =
    intervalMs === undefined
      ? SILENT_PROGRESS
      : purgeProgress(intervalMs, (line) => stderr.write(`${line}\n`));
  try {
    const result = await purgeCommand(
      store,
      { limit: args.limit, batches: args.batches, stopRequested: () => stop.received, progress },
      print,
    );
    return result.stoppedBy === undefined
      ? ExitCode.Ok
      : signalExitCode(result.stoppedBy as NodeJS.Signals);
  } finally {
    stop.dispose();
  }
}

/** A command's warnings, a line each on `stderr`: what the operator must see, whatever `stdout` feeds. */
function warnOn(stderr: Output): Print {
  return (line) => stderr.write(`${line}\n`);
}

/** Run the command; resolves to its exit code (a failure that is an exception rejects instead). */
async function execute(
  command: Exclude<CliCommand, { command: 'help' }>,
  print: Print,
  stderr: Output,
): Promise<number> {
  // SQLite's migrate opens (and may create) the file itself; every other command works on an open store.
  if (command.command === 'migrate' && command.sqliteFile !== undefined) {
    await requireSqliteDriver();
    migrateSqliteCommand(command.sqliteFile, command, print, warnOn(stderr));
    return ExitCode.Ok;
  }
  if (command.command === 'health') {
    const timeoutMs = command.timeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;
    const args = { timeoutMs, json: command.json };
    const openWithin = (left: number) => open(command, left);
    const named = { store: storeKind(command), target: targetLabel(command) };
    const healthy = await healthCommand(openWithin, named, args, print);
    return healthy ? ExitCode.Ok : ExitCode.Failure;
  }
  const target = await open(command, command.timeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS);
  try {
    switch (command.command) {
      case 'migrate':
        // Parsing refuses migrate on Redis, and SQLite's is above: this is PostgreSQL.
        if (target.pool !== undefined) {
          await migrateCommand(target.pool, command, print, warnOn(stderr));
        }
        break;
      case 'purge':
        return await purgeUntilStopped(target.store, command, print, stderr);
      case 'inspect':
        await inspectCommand(target.store, command, print);
        break;
      case 'stats':
        await statsCommand(target.store, target.label, command, print);
        break;
      case 'list':
        await listCrashedCommand(target.store, target.label, command, print);
        break;
    }
  } catch (error) {
    // The store answered when it was opened: only a failure that is not itself an answer (a dropped or
    // silent connection, not a missing table) means it went away, so that running again is the fix.
    if (isStoreUnavailableError(error) && target.interrupted(error)) {
      throw new InterruptedCommandError(target.label, error);
    }
    throw error;
  } finally {
    await target.close();
  }
  return ExitCode.Ok;
}

/**
 * Run the CLI with `argv` (without node and script paths); resolves to the exit code. A reader of the
 * output that goes away early (`| head`) ends the output quietly, and the command's own exit code stands.
 */
export async function runCli(argv: readonly string[]): Promise<number> {
  const stdout = output(process.stdout);
  const stderr = output(process.stderr);
  const code = await runWith(argv, stdout, stderr);
  // Writes to a file or a pipe are synchronous, but a failed one's 'error' event comes on a later tick
  // than this continuation: let it arrive. Then any failure but a gone reader (a full disk under `>`)
  // lost the report: not a success.
  await new Promise((resolve) => setImmediate(resolve));
  if (stdout.failure === undefined) return code;
  stderr.write(`idempotency-kit: cannot write the output: ${stdout.failure.message}\n`);
  return ExitCode.Failure;
}

/** {@link runCli}'s work, writing to `stdout` and `stderr`. */
async function runWith(argv: readonly string[], stdout: Output, stderr: Output): Promise<number> {
  let command: CliCommand;
  try {
    command = parseCli(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    stderr.write(`idempotency-kit: ${error.message}\nRun 'idempotency-kit --help' for usage.\n`);
    return ExitCode.Usage;
  }
  if (command.command === 'help') {
    stdout.write(command.topic === undefined ? HELP : commandHelp(command.topic));
    return ExitCode.Ok;
  }
  const print = (line: string) => stdout.write(`${line}\n`);
  try {
    return await execute(command, print, stderr);
  } catch (error) {
    // Invalid schema/table names are usage errors even though they are found after parsing.
    const usage = isIdempotencyError(error) && error.code === 'invalid_options';
    stderr.write(
      `idempotency-kit ${command.command} failed: ${(error as Error).message}\n${hintFor(command, error)}`,
    );
    return usage ? ExitCode.Usage : ExitCode.Failure;
  }
}

/** The messages of an error and of its causes, a few levels deep: a store wraps the driver's error. */
function causeChainText(error: unknown): string {
  return causeChain(error)
    .map((cause) => ` ${cause instanceof Error ? cause.message : String(cause)}`)
    .join('');
}

/**
 * A line on what to do, for a failure whose cause the command line can fix or outlive: a Redis Cluster
 * node named without `--redis-cluster` answers a key of another node's slots with a MOVED redirection; a
 * store that went away mid-command (a restart, a failover) leaves nothing half done that a second run
 * would not finish.
 */
function hintFor(command: Exclude<CliCommand, { command: 'help' }>, error: unknown): string {
  if (
    command.redisUrl !== undefined &&
    command.redisCluster !== true &&
    /\bMOVED\b/.test(causeChainText(error))
  ) {
    return 'The Redis server is a Cluster node: add --redis-cluster to reach every node.\n';
  }
  if (error instanceof InterruptedCommandError) {
    const effect =
      command.command === 'purge'
        ? 'purge deletes in batches: what it deleted stays deleted, and a second run goes on from there'
        : `${command.command} changes nothing`;
    return `The store (${error.target}) stopped answering after the command had connected (a restart, a failover?); ${effect}: run it again.\n`;
  }
  return '';
}
