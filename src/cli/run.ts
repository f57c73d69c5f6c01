/**
 * The CLI's driver: parse, load `pg` (the user's installed peer) at run time, run the command, and map the
 * result to an exit code. The rest of the package never depends on `pg`.
 * @module
 */
import { isIdempotencyError } from '../core/errors.js';
import type { PgPool } from '../postgres/client.js';
import { ExitCode, HELP, parseCli, UsageError } from './args.js';
import { inspectCommand, migrateCommand, purgeCommand, statsCommand } from './commands.js';

interface PgModule {
  Pool: new (config: {
    connectionString: string;
    max?: number;
    application_name?: string;
  }) => PgPool & {
    end(): Promise<void>;
    on(event: 'error', listener: (error: Error) => void): unknown;
  };
}

async function loadPg(): Promise<PgModule> {
  try {
    const mod = (await import('pg')) as unknown as { default?: PgModule } & Partial<PgModule>;
    return (mod.default ?? mod) as PgModule;
  } catch (error) {
    throw new Error("the 'pg' package is required: npm install pg", { cause: error });
  }
}

/** Run the CLI with `argv` (without node and script paths); resolves to the exit code. */
export async function runCli(argv: readonly string[]): Promise<number> {
  let command: ReturnType<typeof parseCli>;
  try {
    command = parseCli(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(
      `idempotency-kit: ${error.message}\nRun 'idempotency-kit --help' for usage.\n`,
    );
    return ExitCode.Usage;
  }
  if (command.command === 'help') {
    process.stdout.write(HELP);
    return ExitCode.Ok;
  }
  const print = (line: string) => process.stdout.write(`${line}\n`);
  let pool: Awaited<ReturnType<typeof loadPg>>['Pool']['prototype'] | undefined;
  try {
    const pg = await loadPg();
    pool = new pg.Pool({
      connectionString: command.databaseUrl,
      max: 1,
      application_name: 'idempotency-kit-cli',
    });
    // An idle connection dropped by the server must not crash the command with an unhandled event.
    pool.on('error', () => {});
    switch (command.command) {
      case 'migrate':
        await migrateCommand(pool, command, print);
        break;
      case 'purge':
        await purgeCommand(pool, command, print);
        break;
      case 'inspect':
        await inspectCommand(pool, command, print);
        break;
      case 'stats':
        await statsCommand(pool, command, print);
        break;
    }
    return ExitCode.Ok;
  } catch (error) {
    // Invalid schema/table names are usage errors even though they are found after parsing.
    const usage = isIdempotencyError(error) && error.code === 'invalid_options';
    process.stderr.write(
      `idempotency-kit ${command.command} failed: ${(error as Error).message}\n`,
    );
    return usage ? ExitCode.Usage : ExitCode.Failure;
  } finally {
    await pool?.end().catch(() => {});
  }
}
