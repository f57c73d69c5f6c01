/**
 * Whether this thread's event loop has lately been busy: the signal the batcher uses to trade parallel
 * store calls for larger batches once the process, not the store, is what limits throughput.
 *
 * Why: while the event loop has time to spare, a call sent at once costs nothing but its own round trip,
 * and several calls in flight keep latency low. Once the loop is busy (a CPU-bound service), every store
 * call costs the process a command to encode, a write, a reply to parse and the promises around them, and
 * the backend a call's fixed cost (for Redis, a script call's ~6 µs before its first key): holding calls
 * back while one is outstanding makes fewer, larger calls and leaves more CPU for requests. Measured on
 * Express S2 with Redis (`bench/http-cpu.ts`, same run, 7 rounds): server CPU per request +50 µs over the
 * baseline with 4 calls in flight, +38 µs with 1; but on S1 (a 50 ms handler, a mostly idle loop) 1 call
 * in flight cost 4 points of throughput, as calls waited behind each other for nothing. Deciding by load
 * keeps both.
 * @module
 */
import { performance } from 'node:perf_hooks';

/** Event-loop utilization (share of time not waiting for I/O) at or above which the loop is busy. */
export const BUSY_UTILIZATION = 0.8;

/** Length of one measurement, in ms: the verdict follows a change of load within about two of them. */
export const SAMPLE_MS = 100;

// One gauge per thread (module state is per thread): the utilization is the thread's, whatever the
// number of engines in it.
let previous = performance.eventLoopUtilization();
let sampledAt = performance.now();
let busy = false;

/**
 * True when this thread's event loop was busy ({@link BUSY_UTILIZATION} or more) over the last complete
 * measurement. Cheap enough to ask on every batch: it reads the clock, and measures again only once
 * {@link SAMPLE_MS} have passed since the last measurement (which then covers everything since that one).
 */
export function eventLoopBusy(): boolean {
  const now = performance.now();
  if (now - sampledAt >= SAMPLE_MS) {
    const current = performance.eventLoopUtilization();
    busy = performance.eventLoopUtilization(current, previous).utilization >= BUSY_UTILIZATION;
    previous = current;
    sampledAt = now;
  }
  return busy;
}
