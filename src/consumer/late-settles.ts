/**
 * Settle calls a delivery gave up on after `brokerTimeout` (settle.ts) that go on: a dead letter's write
 * or a retry that has not answered yet. Their delivery has settled and freed its slot, so a drain of the
 * in-flight deliveries no longer waits for them; this tracker is what `close()` waits for them by.
 *
 * Why: a letter given up on that lands later is reported then (`onDeadLetter`: the only word that its
 * message was dead-lettered), and no hook is called once `close()` resolved (hook-calls.ts). A `close()`
 * that resolved `true` behind such a write lost that report for good, although it said everything had
 * settled; and a late retry acked its original behind it. So every adapter's `close()` waits for these
 * too, within its `drainTimeout`, and resolves `false` when they did not settle in time.
 * @module
 */
import { TIMED_OUT, within } from './timer-race.js';

/** The settle calls of one consumer still going after their delivery gave up on them. */
export class LateSettles {
  private readonly running = new Set<Promise<unknown>>();

  /** Calls still going. */
  get size(): number {
    return this.running.size;
  }

  /**
   * Track `call`, given up on and still going, until it settles (either way: a rejection is not passed
   * on). Pass the promise that settles once what the call's answer fires is done (its late
   * `onDeadLetter`), so that a `close()` waiting for it resolves after that report, not before.
   */
  add(call: Promise<unknown>): void {
    this.running.add(call);
    const forget = () => this.running.delete(call);
    call.then(forget, forget);
  }

  /**
   * Resolve once no tracked call is going, or at `deadline` (a `performance.now()` time: `close()`'s, so
   * that this wait shares its `drainTimeout`); resolves to whether they all settled. A call added while
   * it waits is waited for too. The timer is ref'd: a process must not exit in the middle of `close()`.
   */
  async settledBy(deadline: number): Promise<boolean> {
    while (this.running.size > 0) {
      const left = Math.max(deadline - performance.now(), 0);
      const all = Promise.allSettled([...this.running]);
      if ((await within(all, left, false)) === TIMED_OUT) return false;
    }
    return true;
  }
}
