/**
 * `purge`'s progress: a purge of millions of rows runs for minutes, and said nothing until its last line.
 * Every interval (checked after each batch, so never more often than one line a batch) it says on stderr
 * how many records it has deleted and at what rate. Stderr, because stdout is the result a script reads:
 * the one `purged N expired records in B batches` line.
 *
 * By default only when stderr is a terminal: someone is watching. A cron job or a CI step captures stderr
 * into a log or a mail, where a line every 5 s of a long purge is noise, and a non-empty stderr often
 * reads as a failure. `--progress-interval` given explicitly asks for the lines wherever stderr goes (a
 * supervised job that wants a heartbeat in its log); `--quiet` never prints them.
 * @module
 */

/** How often `purge` reports its progress on a terminal without `--progress-interval`. */
export const DEFAULT_PROGRESS_INTERVAL_MS = 5_000;

/**
 * How often `purge` prints its progress, or `undefined` for never: `--quiet` never, an explicit
 * `--progress-interval` always at that interval, else every {@link DEFAULT_PROGRESS_INTERVAL_MS} when
 * stderr is a terminal and never when it is not (a file, a pipe, a cron job's mail).
 */
export function progressIntervalMs(
  args: { quiet?: true; progressIntervalMs?: number },
  stderrIsTerminal: boolean,
): number | undefined {
  if (args.quiet === true) return undefined;
  if (args.progressIntervalMs !== undefined) return args.progressIntervalMs;
  return stderrIsTerminal ? DEFAULT_PROGRESS_INTERVAL_MS : undefined;
}

/** Told of each batch as it ends; prints a progress line when the interval has passed since the last. */
export interface PurgeProgress {
  /** A batch ended: `total` records deleted so far, in `batches` batches. */
  batchDone(total: number, batches: number): void;
}

/** Progress that prints nothing (`--quiet`). */
export const SILENT_PROGRESS: PurgeProgress = { batchDone() {} };

/**
 * Progress lines through `print`, at most one every `intervalMs`, the first one `intervalMs` after the
 * start: a purge that ends sooner prints none. `now` is a monotonic clock in ms (tests give their own).
 */
export function purgeProgress(
  intervalMs: number,
  print: (line: string) => void,
  now: () => number = () => performance.now(),
): PurgeProgress {
  const start = now();
  let last = start;
  return {
    batchDone(total, batches) {
      const at = now();
      if (at - last < intervalMs) return;
      last = at;
      const seconds = (at - start) / 1000;
      const rate = seconds > 0 ? Math.round(total / seconds) : total;
      print(
        `idempotency-kit purge: ${total} expired record${total === 1 ? '' : 's'} deleted so far in ` +
          `${batches} batch${batches === 1 ? '' : 'es'} (${formatSeconds(seconds)}, ${rate} records/s)`,
      );
    },
  };
}

/** `4.2 s` under a minute, `12 min 5 s` past it. */
function formatSeconds(seconds: number): string {
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  return `${Math.floor(seconds / 60)} min ${Math.floor(seconds % 60)} s`;
}
