/**
 * `purge`'s progress lines by default only on a terminal: a cron job or a CI step, whose stderr is a file
 * or a pipe, got a line every 5 s of a long purge in its log (and a non-empty stderr that often reads as a
 * failure). `--progress-interval` given explicitly still prints them wherever stderr goes.
 *
 * The CLI runs as a child process on a SQLite file, its stderr a pipe, or a terminal (a pseudo-terminal
 * util-linux's `script` opens, where stdout and stderr arrive mixed). A long purge is simulated, not
 * waited for: a preload makes the child's monotonic clock (`performance.now`, which the progress reads)
 * run 100 000 times fast, so every batch looks 5 s past the one before.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite/index.js';
import { bundledCli as cli, cliBundle } from '../../helpers/bundled-cli.js';

const dir = mkdtempSync(join(tmpdir(), 'ik-cli-progress-tty-'));
const EXPIRED = 5;
const FAST_CLOCK = {
  NODE_OPTIONS:
    '--import=data:text/javascript,const%20n=performance.now.bind(performance);performance.now=()=>n()*100000;',
};

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A migrated SQLite file holding `EXPIRED` completed records whose retention ended a day ago. */
async function expiredRecords(name: string): Promise<string> {
  const file = join(dir, `${name}.db`);
  const twoDaysAgo = { now: () => Date.now() - 2 * 86_400_000 };
  const store = sqliteStore({ database: file, clock: twoDaysAgo });
  const engine = createIdempotency({ store, clock: twoDaysAgo, retentionMs: 3_600_000 });
  for (let i = 0; i < EXPIRED; i++) await engine.run({ key: `k${i}` }, () => i);
  await store.close();
  return file;
}

/** Run the CLI with stdout and stderr on a pseudo-terminal; resolves to what the terminal showed. */
async function onTerminal(args: string[]): Promise<{ code: number; shown: string }> {
  const command = [process.execPath, await cliBundle(), ...args]
    .map((word) => `'${word.replaceAll("'", "'\\''")}'`)
    .join(' ');
  return new Promise((resolve) => {
    execFile(
      'script',
      ['--quiet', '--return', '--command', command, '/dev/null'],
      { env: { ...process.env, ...FAST_CLOCK }, timeout: 60_000 },
      (error, stdout) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, shown: stdout.replaceAll('\r\n', '\n') });
      },
    );
  });
}

let files: { plain: string; explicit: string; terminal: string };
beforeAll(async () => {
  files = {
    plain: await expiredRecords('plain'),
    explicit: await expiredRecords('explicit'),
    terminal: await expiredRecords('terminal'),
  };
});

describe('idempotency-kit purge progress off a terminal', () => {
  it('prints no progress when stderr is not a terminal and no interval was asked for', async () => {
    // Act: a batch a record, each one "5 s" after the last
    const run = await cli(['purge', '--sqlite', files.plain, '--limit', '1'], FAST_CLOCK);
    // Assert
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`purged ${EXPIRED} expired records in ${EXPIRED + 1} batches\n`);
    expect(run.stderr).toBe('');
  });

  it('prints its progress anywhere when --progress-interval is given', async () => {
    // Act
    const run = await cli(
      ['purge', '--sqlite', files.explicit, '--limit', '1', '--progress-interval', '5s'],
      FAST_CLOCK,
    );
    // Assert
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`purged ${EXPIRED} expired records in ${EXPIRED + 1} batches\n`);
    expect(run.stderr).toMatch(
      /^idempotency-kit purge: 1 expired record deleted so far in 1 batch /,
    );
  });

  it('prints its progress by default on a terminal', async () => {
    // Act
    const run = await onTerminal(['purge', '--sqlite', files.terminal, '--limit', '1']);
    // Assert
    expect(run.code).toBe(0);
    expect(run.shown).toMatch(
      /^idempotency-kit purge: 1 expired record deleted so far in 1 batch /m,
    );
    expect(run.shown).toMatch(/^purged 5 expired records in 6 batches$/m);
  });
});
