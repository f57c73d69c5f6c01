/**
 * Knowing when an idempotent consumer row has drained its messages, and stopping a row that never will: the
 * hooks both consumer benches give the consumer, and the promise they wait on.
 */

/** The consumer hooks a row passes on, and what it waits for. */
export interface DrainWatch {
  /** Counts executed messages; the row is done at `count`. */
  onExecuted: () => void;
  /** Counts retries; a row whose retries reach `count` has stalled. */
  onRetry: (event: { reason: string; error?: unknown }) => void;
  /** Resolves once `count` messages executed; rejects, saying why, once the row has stalled. */
  drained: Promise<void>;
}

/**
 * Watch a row of `count` messages. A healthy row retries nothing; one whose messages keep coming back
 * instead of executing (a store failing every call) would spin for ever, so it is stopped, with the
 * retries by reason and the last error, once its retries outnumber its messages.
 */
export function drainWatch(count: number): DrainWatch {
  let executed = 0;
  let retried = 0;
  let lastError: unknown;
  const reasons = new Map<string, number>();
  let done!: () => void;
  let stall!: (error: Error) => void;
  const drained = new Promise<void>((resolve, reject) => {
    done = resolve;
    stall = reject;
  });
  return {
    onExecuted: () => {
      if (++executed === count) done();
    },
    onRetry: ({ reason, error }) => {
      reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
      if (error !== undefined) lastError = error;
      if (++retried === count) {
        const why = [...reasons].map(([r, n]) => `${r} ×${n}`).join(', ');
        stall(
          new Error(
            `the row stalled: ${retried} retries (${why}) against ${executed} executed; last error: ${String(lastError)}`,
            { cause: lastError },
          ),
        );
      }
    },
    drained,
  };
}
