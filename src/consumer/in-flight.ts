/**
 * Flow control and graceful shutdown: a counting limit on messages handled at once, and a drain that
 * waits for the ones in flight before a consumer closes.
 * @module
 */
import { TIMED_OUT, within } from './timer-race.js';

/** Tracks in-flight deliveries, bounded by `limit`. */
export class InFlight {
  private active = 0;
  private readonly waiters: Array<() => void> = [];
  private readonly idle: Array<() => void> = [];
  // One function for every task's settlement, rather than two closures per task.
  private readonly settled = () => this.release();

  constructor(private readonly limit: number) {}

  /** Deliveries being handled now. */
  get size(): number {
    return this.active;
  }

  /** Free slots right now. */
  get free(): number {
    return Math.max(this.limit - this.active, 0);
  }

  /** Wait for a free slot and take it. */
  async acquire(): Promise<void> {
    while (this.active >= this.limit) {
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
    this.active++;
  }

  /** Take a free slot now, without waiting; false when every slot is busy. */
  tryAcquire(): boolean {
    if (this.active >= this.limit) return false;
    this.active++;
    return true;
  }

  /**
   * Resolve once a slot may be free, without taking it (take it with {@link tryAcquire}, which may lose
   * it to another caller), or once {@link wakeAll} is called. A wait a closing consumer can end without
   * racing a long-lived "closed" promise: each such race leaves a reaction on that promise, kept until it
   * settles, so one per message grows the heap for as long as the consumer runs.
   */
  waitForFree(): Promise<void> {
    if (this.active < this.limit) return Promise.resolve();
    return new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  /** Wake every caller waiting for a slot; {@link acquire} waits again, others look at why they waited. */
  wakeAll(): void {
    for (const resolve of this.waiters.splice(0)) resolve();
  }

  /** Run `task` in a slot already taken with {@link acquire} (or over the limit, for push brokers). */
  run(task: () => Promise<unknown>): void {
    this.track(task());
  }

  /** Take a slot without waiting (the broker's prefetch already bounds deliveries) and run `task`. */
  start(task: () => Promise<unknown>): void {
    this.active++;
    this.run(task);
  }

  /**
   * Take a slot without waiting, for a task already running as `running` (a push broker's delivery, the
   * prefetch bounding them): the slot is given back when it settles.
   */
  add(running: Promise<unknown>): void {
    this.active++;
    this.track(running);
  }

  private track(running: Promise<unknown>): void {
    // Tasks report their own failures; a rejection here must not crash the process.
    void running.then(this.settled, this.settled);
  }

  /** Resolve once nothing is in flight, or after `timeoutMs`; resolves to whether it drained. */
  async drain(timeoutMs: number): Promise<boolean> {
    if (this.active === 0) return true;
    const drained = new Promise<void>((resolve) => this.idle.push(resolve));
    // A ref'd timer: a process must not exit in the middle of close().
    return (await within(drained, timeoutMs, false)) !== TIMED_OUT;
  }

  /**
   * Resolve once nothing is in flight (at once when nothing is). No timer: it may never resolve, behind a
   * handler that never settles, and then keeps nothing but its own callback alive. For clean-up that must
   * wait for the last delivery however long it takes, after a drain that timed out.
   */
  whenIdle(): Promise<void> {
    if (this.active === 0) return Promise.resolve();
    return new Promise<void>((resolve) => this.idle.push(resolve));
  }

  /** Give back a slot taken with {@link acquire} without running a task. */
  release(): void {
    this.active--;
    this.waiters.shift()?.();
    if (this.active === 0) for (const resolve of this.idle.splice(0)) resolve();
  }
}

/** Sleep `ms`, unless `signal` aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * Whether `promise` settles within `ms` (the timer is cleared either way; a rejection is passed on): a
 * pull loop's end awaited for at most a consumer's `drainTimeout`. The timer is ref'd: a process must not
 * exit in the middle of close().
 */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return (await within(promise, ms, false)) !== TIMED_OUT;
}
