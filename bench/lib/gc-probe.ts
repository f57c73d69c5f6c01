/**
 * Preloaded (`--import`) into a benchmark's server child by `bench/http-split.ts`: counts the requests the
 * process served and its garbage-collection pauses, by kind, from `perf_hooks` GC entries, and answers a
 * `'gc'` IPC message with the totals so far ({@link GcProbeReport}). A pause is wall time the main thread
 * stood still; the helper threads' share of the same collection shows in the process's CPU time instead.
 *
 * With `IK_BENCH_SURVIVORS=1` it also runs V8's sampling heap profiler over only the objects that outlive
 * a scavenge (minor collections' garbage left out; what major collections free, or nothing yet, kept),
 * and adds their estimated bytes by allocation site to the answer ({@link SurvivorTotals}). A scavenge
 * costs in proportion to what it copies, not to what was allocated: these are the objects that make it
 * cost. The profiler slows the server, so CPU figures of such a run are not comparable with others.
 */
import http from 'node:http';
import { Session } from 'node:inspector/promises';
import { constants, type PerformanceEntry, PerformanceObserver } from 'node:perf_hooks';

/**
 * Bytes of the objects that outlived a scavenge, estimated by V8's sampling heap profiler since the probe
 * started: in all, and by allocation site (`function file:line`).
 */
export interface SurvivorTotals {
  bytes: number;
  sites: Record<string, number>;
}

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
  /** Only with `IK_BENCH_SURVIVORS=1`. */
  survivors?: SurvivorTotals;
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

/** A node of V8's sampling heap profile (`HeapProfiler.SamplingHeapProfileNode`). */
interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

const survivorSession = process.env.IK_BENCH_SURVIVORS === '1' ? new Session() : undefined;
if (survivorSession !== undefined) {
  survivorSession.connect();
  await survivorSession.post('HeapProfiler.startSampling', {
    samplingInterval: 8192,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: false,
  });
}

// The profile so far, summed by site (the same site reached by different stacks adds up).
async function survivorTotals(session: Session): Promise<SurvivorTotals> {
  const { profile } = await session.post('HeapProfiler.getSamplingProfile');
  const sites: Record<string, number> = {};
  let bytes = 0;
  const visit = (node: ProfileNode): void => {
    const { functionName, url, lineNumber } = node.callFrame;
    // The probe's own answers (the profile itself, read over the inspector) are not the server's.
    if (url === 'node:inspector') return;
    if (node.selfSize > 0) {
      const file = url.replace(/^.*\/(node_modules\/|dist\/|bench\/)/, '$1');
      const site = `${functionName || '(anonymous)'} ${file}:${lineNumber + 1}`;
      sites[site] = (sites[site] ?? 0) + node.selfSize;
      bytes += node.selfSize;
    }
    for (const child of node.children) visit(child);
  };
  visit(profile.head as unknown as ProfileNode);
  return { bytes, sites };
}

process.on('message', (message) => {
  if (message !== 'gc') return;
  const gc = { ...totals };
  if (survivorSession === undefined) {
    process.send?.({ gc } satisfies GcProbeReport);
    return;
  }
  void survivorTotals(survivorSession).then((survivors) =>
    process.send?.({ gc, survivors } satisfies GcProbeReport),
  );
});
