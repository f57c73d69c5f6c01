/**
 * `idempotency-kit <command> --help` from the built executable: that command's usage, options and an
 * example on stdout, exit 0, and no store opened (a SQLite file is not created, an unreachable server is
 * not waited for); an unknown command with --help is the usage error it is without.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI_COMMANDS } from '../../../src/cli/args.js';
import { commandHelp } from '../../../src/cli/command-help.js';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';

const dir = mkdtempSync(join(tmpdir(), 'cli-command-help-'));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('idempotency-kit <command> --help', () => {
  it.each(CLI_COMMANDS.map((command) => [command]))(
    'prints %s’s help for --help, -h and help <command>, and exits 0',
    async (command) => {
      // Act
      const runs = await Promise.all([
        cli([command, '--help']),
        cli([command, '-h']),
        cli(['help', command]),
      ]);
      // Assert
      for (const run of runs) {
        expect(run).toEqual({ code: 0, stdout: commandHelp(command), stderr: '' });
      }
      expect(runs[0]?.stdout).toContain(`Usage: idempotency-kit ${command}`);
    },
  );

  it('opens no store: the SQLite file is not created, the unreachable server not contacted', async () => {
    // Arrange: a file that migrate would create, a port nothing listens on, a DATABASE_URL too
    const file = join(dir, 'never.db');
    // Act
    const [migrate, purge] = await Promise.all([
      cli(['migrate', '--sqlite', file, '--help']),
      cli(['purge', '--database-url', 'postgres://u@127.0.0.1:1/none', '--timeout', '30s', '-h']),
    ]);
    // Assert: a connection attempt would have failed (exit 1), not printed the help
    expect(migrate).toMatchObject({ code: 0, stderr: '' });
    expect(migrate.stdout).toContain('Usage: idempotency-kit migrate');
    expect(existsSync(file)).toBe(false);
    expect(purge).toMatchObject({ code: 0, stderr: '' });
    expect(purge.stdout).toContain('Usage: idempotency-kit purge');
  });

  it('refuses an unknown command with --help as without it (exit 2)', async () => {
    // Act
    const runs = await Promise.all([cli(['frob', '--help']), cli(['help', 'frob'])]);
    // Assert
    for (const run of runs) {
      expect(run.code).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toContain("idempotency-kit: unknown command 'frob'");
    }
  });

  it('keeps the global help for --help and help alone', async () => {
    // Act
    const [flag, command] = await Promise.all([cli(['--help']), cli(['help'])]);
    // Assert
    expect(flag.code).toBe(0);
    expect(flag.stdout).toContain('Usage: idempotency-kit <command> [options]');
    expect(command.stdout).toBe(flag.stdout);
  });
});
