import { describe, expect, it } from 'vitest';
import { parseCli, UsageError } from '../../../src/cli/args.js';
import { purgeCommand } from '../../../src/cli/commands.js';
import { output } from '../../../src/cli/output.js';
import {
  DEFAULT_PROGRESS_INTERVAL_MS,
  progressIntervalMs,
  purgeProgress,
} from '../../../src/cli/purge-progress.js';
import type { Store } from '../../../src/store/store.js';

const url = 'postgres://u@h/db';

/** A store whose purge deletes `limit` rows a batch until `rows` are gone, each batch `stepMs` of `clock`. */
function purgingStore(rows: number, clock: { now: number }, stepMs: number): Store {
  let left = rows;
  return {
    name: 'fake',
    capabilities: { purge: true },
    async purgeExpired({ limit }: { limit: number }) {
      clock.now += stepMs;
      const deleted = Math.min(limit, left);
      left -= deleted;
      return deleted;
    },
  } as unknown as Store;
}

describe('purge progress', () => {
  it('prints a line each interval, between batches, never after the last batch', async () => {
    // Arrange: 10 full batches of 100, 1 s each, a line due every 3 s; the 11th batch is empty
    const clock = { now: 0 };
    const progressLines: string[] = [];
    const result: string[] = [];
    const progress = purgeProgress(
      3_000,
      (line) => progressLines.push(line),
      () => clock.now,
    );
    // Act
    await purgeCommand(
      purgingStore(1_000, clock, 1_000),
      { limit: 100, batches: Number.MAX_SAFE_INTEGER, progress },
      (line) => result.push(line),
    );
    // Assert
    expect(progressLines).toEqual([
      'idempotency-kit purge: 300 expired records deleted so far in 3 batches (3.0 s, 100 records/s)',
      'idempotency-kit purge: 600 expired records deleted so far in 6 batches (6.0 s, 100 records/s)',
      'idempotency-kit purge: 900 expired records deleted so far in 9 batches (9.0 s, 100 records/s)',
    ]);
    expect(result).toEqual(['purged 1000 expired records in 11 batches']);
  });

  it('prints nothing for a purge shorter than the interval', async () => {
    // Arrange
    const clock = { now: 0 };
    const lines: string[] = [];
    // Act
    await purgeCommand(
      purgingStore(500, clock, 10),
      {
        limit: 100,
        batches: Number.MAX_SAFE_INTEGER,
        progress: purgeProgress(
          5_000,
          (line) => lines.push(line),
          () => clock.now,
        ),
      },
      () => {},
    );
    // Assert
    expect(lines).toEqual([]);
  });

  it('says minutes past a minute', () => {
    // Arrange
    const clock = { now: 0 };
    const lines: string[] = [];
    const progress = purgeProgress(
      5_000,
      (line) => lines.push(line),
      () => clock.now,
    );
    // Act
    clock.now = 125_000;
    progress.batchDone(250_000, 50);
    // Assert
    expect(lines).toEqual([
      'idempotency-kit purge: 250000 expired records deleted so far in 50 batches (2 min 5 s, 2000 records/s)',
    ]);
  });

  it('parses --quiet, -q and --progress-interval for purge', () => {
    // Act / Assert
    expect(parseCli(['purge', '--database-url', url, '--quiet'], {})).toMatchObject({
      quiet: true,
    });
    expect(parseCli(['purge', '--database-url', url, '-q'], {})).toMatchObject({ quiet: true });
    expect(
      parseCli(['purge', '--database-url', url, '--progress-interval', '2s'], {}),
    ).toMatchObject({ progressIntervalMs: 2_000 });
    expect(parseCli(['purge', '--database-url', url], {})).not.toHaveProperty('quiet');
  });

  it.each([
    [['purge', '--database-url', url, '-q', '--progress-interval', '1s'], /give one/],
    [['purge', '--database-url', url, '--progress-interval', '0'], /positive duration/],
    [['purge', '--database-url', url, '--progress-interval', '30d'], /at most 24 days/],
    [['stats', '--database-url', url, '--quiet'], /apply to purge only/],
    [['list', '--crashed', '--sqlite', 'x.db', '--progress-interval', '1s'], /purge only/],
  ])('refuses %j', (argv, message) => {
    // Act
    const attempt = () => parseCli(argv, {});
    // Assert
    expect(attempt).toThrow(UsageError);
    expect(attempt).toThrow(message);
  });

  it.each([
    ['a terminal, by default', {}, true, DEFAULT_PROGRESS_INTERVAL_MS],
    ['a file or a pipe (a cron job), by default', {}, false, undefined],
    ['a file or a pipe, with --progress-interval', { progressIntervalMs: 2_000 }, false, 2_000],
    ['a terminal, with --progress-interval', { progressIntervalMs: 2_000 }, true, 2_000],
    ['a terminal, with --quiet', { quiet: true as const }, true, undefined],
  ])('decides how often to print progress on %s', (_where, args, terminal, expected) => {
    // Act / Assert
    expect(progressIntervalMs(args, terminal)).toBe(expected);
  });

  it("tells a terminal's stream from a file's or a pipe's", () => {
    // Arrange
    const stream = (isTTY?: boolean) => ({ write: () => true, on: () => undefined, isTTY });
    // Act / Assert
    expect(output(stream(true) as never).isTerminal).toBe(true);
    expect(output(stream(undefined) as never).isTerminal).toBe(false);
    expect(output(stream(false) as never).isTerminal).toBe(false);
  });
});
