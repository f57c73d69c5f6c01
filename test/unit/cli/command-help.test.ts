/**
 * Per-command help (`idempotency-kit purge --help`, `help purge`): what the parser returns, and that the
 * help texts, the parser and docs/cli.md agree (a command documented has a help; an option a help shows
 * is one the parser takes for that command, and one the docs describe; the examples parse).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CLI_COMMANDS, parseCli, UsageError } from '../../../src/cli/args.js';
import { commandHelp, commandHelpFlags, commandList } from '../../../src/cli/command-help.js';
import { HELP } from '../../../src/cli/global-help.js';

const docs = readFileSync(new URL('../../../docs/cli.md', import.meta.url), 'utf8');
const url = 'postgres://u@h/db';
const storageKey = 'ab'.repeat(32);

/** The command line that gives `flag` to `command`, with what it needs beside (a value, --key). */
function argvWith(command: string, flag: string, store: string[]): string[] {
  const values: Record<string, string[]> = {
    '--limit': ['5'],
    '--batches': ['2'],
    '--timeout': ['1s'],
    '--statement-timeout': ['1s'],
    '--lock-timeout': ['1s'],
    '--lock-retries': ['2'],
    '--redis-client': ['ioredis'],
    '--prefix': ['p:'],
    '--schema': ['s'],
    '--table': ['t'],
    '--after': ['0'],
    '--key': ['k'],
    '--namespace': ['n', '--key', 'k'],
    '--scope': ['s', '--key', 'k'],
    '--http': ['--key', 'k'],
    '--progress-interval': ['1s'],
  };
  const option = [flag, ...(values[flag] ?? [])];
  const positional = command === 'inspect' && !option.includes('--key') ? [storageKey] : [];
  const crashed = command === 'list' && flag !== '--crashed' ? ['--crashed'] : [];
  return [command, ...positional, ...crashed, ...store, ...option];
}

/** Whether the parser takes `flag` for `command` with at least one of the stores. */
function accepted(command: string, flag: string): boolean {
  // Given alone, the store options are their own store.
  const stores = ['--database-url', '--sqlite', '--redis-url'].includes(flag)
    ? [[]]
    : [
        ['--database-url', url],
        ['--sqlite', 'x.db'],
        ['--redis-url', 'redis://h'],
      ];
  const withValue: Record<string, string> = {
    '--database-url': url,
    '--sqlite': 'x.db',
    '--redis-url': 'redis://h',
  };
  return stores.some((store) => {
    const argv = argvWith(command, flag, store);
    if (withValue[flag] !== undefined) argv.push(withValue[flag]);
    try {
      return parseCli(argv, {}).command === command;
    } catch {
      return false;
    }
  });
}

/** A help example as argv: split on spaces, shell quotes removed (the examples need no more). */
function exampleArgv(line: string): string[] {
  return line
    .replace(/^ {2}idempotency-kit /, '')
    .split(' ')
    .map((word) => word.replace(/^"(.*)"$/, '$1'));
}

describe('per-command help', () => {
  it.each(CLI_COMMANDS.map((command) => [command]))(
    'parses <command> --help, -h, --help <command> and help <command> as that command’s help: %s',
    (command) => {
      // Act / Assert
      for (const argv of [
        [command, '--help'],
        [command, '-h'],
        ['--help', command],
        ['help', command],
      ]) {
        expect(parseCli(argv, {}), argv.join(' ')).toEqual({ command: 'help', topic: command });
      }
    },
  );

  it('gives a command’s help whatever else is given, the store included (nothing is opened)', () => {
    // Act / Assert
    expect(parseCli(['purge', '--database-url', url, '--limit', '0', '--help'], {})).toEqual({
      command: 'help',
      topic: 'purge',
    });
    expect(parseCli(['inspect', 'not-a-key', '--sqlite', 'x.db', '-h'], {})).toEqual({
      command: 'help',
      topic: 'inspect',
    });
  });

  it.each([[['frob', '--help']], [['frob', '-h']], [['help', 'frob']], [['--help', 'frob']]])(
    'refuses %j as an unknown command, as without --help',
    (argv) => {
      // Act
      const attempt = () => parseCli(argv, {});
      // Assert
      expect(attempt).toThrow(UsageError);
      expect(attempt).toThrow(
        "unknown command 'frob' (expected migrate, purge, inspect, stats, list or health)",
      );
    },
  );

  it.each([[['--help']], [['help']], [['help', 'help']], [['help', '--json']]])(
    'keeps the global help for %j',
    (argv) => {
      // Act / Assert
      expect(parseCli(argv, {})).toEqual({ command: 'help' });
    },
  );

  it.each(CLI_COMMANDS.map((command) => [command]))(
    'shows %s’s usage, options and an example, not the global help',
    (command) => {
      // Act
      const text = commandHelp(command);
      // Assert
      expect(text).not.toBe(HELP);
      expect(text.startsWith(`Usage: idempotency-kit ${command}`)).toBe(true);
      expect(text).toMatch(/\nOptions:\n/);
      expect(text).toMatch(new RegExp(`\\nExamples?:\\n {2}idempotency-kit ${command} `));
      expect(commandHelpFlags(command)).toContain('--help');
    },
  );

  it('has a help for every command docs/cli.md documents, and a docs section for every command', () => {
    // Arrange: the sections "## `purge`", "## `list --crashed`"…
    const documented = [...docs.matchAll(/^## `([a-z]+)[^`]*`$/gm)].map((match) => match[1]);
    // Assert
    expect([...documented].sort()).toEqual([...CLI_COMMANDS].sort());
    for (const command of documented) {
      expect(() => commandHelp(command as (typeof CLI_COMMANDS)[number])).not.toThrow();
    }
  });

  it.each(CLI_COMMANDS.map((command) => [command]))(
    'lists for %s only options the parser takes for it, each described in docs/cli.md',
    (command) => {
      // Arrange: the docs' Options table, one row per option
      const table = docs.slice(docs.indexOf('## Options'), docs.indexOf('## `migrate`'));
      for (const flag of commandHelpFlags(command)) {
        if (flag === '-h' || flag === '--help') continue;
        // Act / Assert
        expect(accepted(command, flag), `${command} ${flag}`).toBe(true);
        expect(table, flag).toMatch(new RegExp(`^\\| [^|]*\`${flag}[\` ]`, 'm'));
      }
    },
  );

  it.each(CLI_COMMANDS.map((command) => [command]))('shows %s examples that parse', (command) => {
    // Arrange
    const examples = commandHelp(command)
      .split('\n')
      .filter((line) => line.startsWith(`  idempotency-kit ${command}`));
    expect(examples.length).toBeGreaterThan(0);
    for (const example of examples) {
      // Act / Assert
      expect(parseCli(exampleArgv(example), { DATABASE_URL: url }).command, example).toBe(command);
    }
  });
});

describe('global help', () => {
  /** The lines of HELP's section that starts with `heading`, up to the blank line that ends it. */
  function section(heading: string): string {
    const start = HELP.indexOf(`\n${heading}\n`) + heading.length + 2;
    return HELP.slice(start, HELP.indexOf('\n\n', start));
  }

  it("lists the commands from each command's own help, in the parser's order", () => {
    // Act
    const commands = section('Commands:');
    // Assert: made from the per-command texts, one entry or more per command the parser takes
    expect(commands).toBe(commandList());
    const named = [...commands.matchAll(/^ {2}([a-z]+)/gm)].map((match) => match[1]);
    expect([...new Set(named)]).toEqual([...CLI_COMMANDS]);
  });

  it('keeps the command list as it was printed', () => {
    expect(section('Commands:')).toBe(
      [
        '  migrate          Create or upgrade the records table (PostgreSQL, SQLite; safe from several processes at once)',
        '  purge            Delete expired records in bounded batches, never a live lease (PostgreSQL, SQLite)',
        "  inspect <key>    Show a storage key's record and what the next request with that key meets (the key is",
        "                   the 64-hex-digit storage key: a trace's idempotency.key_hash, or storageKeyFor())",
        '  inspect --key <client key> [--namespace <ns>] [--scope <scope>]',
        "                   The same, for the record the engine keeps for a client's own key (Idempotency-Key, a",
        '                   message id) in that namespace (default: default) and scope (default: empty)',
        '  stats            Count records by state, and the age of the oldest live lease',
        '  list --crashed   List the keys whose request crashed and that stay reserved for it (another request',
        '                   gets 422), a page of --limit at a time, each explained as inspect does',
        '  health           Connect and read one key no request can have, each within --timeout: exit 0 when',
        '                   the store answered (a readiness check for the processes that use it), 1 when not',
      ].join('\n'),
    );
  });

  it('shows exactly the options the per-command helps show, no more and no fewer', () => {
    // Arrange
    const shown = `${section('The store (one of):')}\n${section('Options:')}`;
    const flags = [...shown.matchAll(/^ {2}(-[^ ,]+(?:, -[^ ,]+)?)/gm)].flatMap((match) =>
      (match[1] as string).split(', '),
    );
    const perCommand = new Set(CLI_COMMANDS.flatMap((command) => commandHelpFlags(command)));
    // Assert
    expect(new Set(flags)).toEqual(perCommand);
  });
});
