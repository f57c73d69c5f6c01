/**
 * Preloaded (`--import`) into a benchmark's server child by `bench/http-split.ts`: counts the requests the
 * process served and its garbage-collection pauses, by kind, from `perf_hooks` GC entries, and answers a
 * `'gc'` IPC message with the totals so far ({@link GcProbeReport}). A pause is wall time the main thread
 * stood still; the helper threads' share of the same collection shows in the process's CPU time instead.
 */
import http from 'node:http';
import { constants, type PerformanceEntry, PerformanceObserver } from 'node:perf_hooks';

/** What the probe answers: totals since the process started. */
export interface GcProbeReport {
  gc: {
    /** Requests the process's HTTP servers received. */
    requests: number;
    /** Young-generation collections (scavenges) and their pauses, in ms. */
    minor: number;
    minorMs: number;
    /** Full and incremental-marking collections, and their pauses, in ms. */
    major: number;
    majorMs: number;
  };
}

const totals: GcProbeReport['gc'] = { requests: 0, minor: 0, minorMs: 0, major: 0, majorMs: 0 };

// Counted where every server hears of a request: the framework's own listener runs right after.
const emit = http.Server.prototype.emit as (this: http.Server, ...args: unknown[]) => boolean;
http.Server.prototype.emit = function countRequests(this: http.Server, ...args: unknown[]) {
  if (args[0] === 'request') totals.requests++;
  return emit.apply(this, args);
} as typeof http.Server.prototype.emit;

new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const kind = (entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
    if (kind === constants.NODE_PERFORMANCE_GC_MINOR) {
      totals.minor++;
      totals.minorMs += entry.duration;
    } else if (
      kind === constants.NODE_PERFORMANCE_GC_MAJOR ||
      kind === constants.NODE_PERFORMANCE_GC_INCREMENTAL
    ) {
      totals.major++;
      totals.majorMs += entry.duration;
    }
  }
}).observe({ entryTypes: ['gc'] });

process.on('message', (message) => {
  if (message === 'gc') process.send?.({ gc: { ...totals } } satisfies GcProbeReport);
});
