/**
 * The heartbeats of one engine: a single timer per lease length drives the lease extensions of every run
 * in flight, instead of one timer armed and cleared per run. Most runs end long before their first beat
 * is due, and for them a timer per run was pure cost (a `Timeout` object, a timer-list insertion and a
 * removal on every execution).
 * @module
 */
import { AsyncResource } from 'node:async_hooks';
import { MAX_TIMER_MS } from './duration.js';

/** Something that extends its lease when beaten; resolves once the extension attempt is over. */
export interface Beating {
  beat(): Promise<void>;
}

// A member is due this many ticks after it joins, and again after each beat. With a tick every half
// period, the first beat comes between 1 and 1.5 periods after the run started (a period is a third of
// the lease), and later ones at most 1.5 periods after the previous one ended: well inside the lease.
const FIRST_BEAT_TICKS = 3;
const NEXT_BEAT_TICKS = 2;

/** The runs sharing one period, and the timer that ticks for them. */
class Group {
  // Member → the tick at which it is next due (Infinity while its beat is in flight).
  readonly due = new Map<Beating, number>();
  private tick = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly tickMs: number,
    private readonly scope: AsyncResource,
  ) {}

  add(member: Beating): void {
    this.due.set(member, this.tick + FIRST_BEAT_TICKS);
    if (this.timer === undefined) this.arm();
  }

  /** Stop beating `member`; true when the group is left empty (and its timer cleared). */
  remove(member: Beating): boolean {
    this.due.delete(member);
    if (this.due.size > 0) return false;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    return true;
  }

  private arm(): void {
    // In the engine's async context, not the run's that happens to arm it (see Heartbeats.scope).
    this.timer = this.scope.runInAsyncScope(() => setTimeout(() => this.onTick(), this.tickMs));
    // A pending heartbeat must never keep a process alive on its own.
    this.timer.unref();
  }

  private onTick(): void {
    this.tick++;
    for (const [member, due] of this.due) {
      if (due > this.tick) continue;
      this.due.set(member, Number.POSITIVE_INFINITY);
      // Still running (not removed meanwhile): due again, counted from the end of this beat.
      const again = () => {
        if (this.due.has(member)) this.due.set(member, this.tick + NEXT_BEAT_TICKS);
      };
      void member.beat().then(again, again);
    }
    this.timer = undefined;
    if (this.due.size > 0) this.arm();
  }
}

/** Heartbeat timers of one engine, one per period in use. */
export class Heartbeats {
  private readonly groups = new Map<number, Group>();
  /**
   * The async context the timers are armed in: the engine's, from its creation. A group's timer is armed
   * by the run that joins it empty, then re-armed from its own callback for as long as any run is in
   * flight; armed in that run's context, it kept the run's AsyncLocalStorage stores (a request, its body)
   * alive long after the run had ended, for as long as the service stayed busy. A beat reports its hooks
   * in its own run's context all the same (lease.ts).
   */
  private readonly scope = new AsyncResource('idempotency-kit.heartbeats');

  /** Start beating `member` about every `periodMs` (first beat after 1 to 1.5 periods). */
  add(member: Beating, periodMs: number): void {
    let group = this.groups.get(periodMs);
    if (group === undefined) {
      // At most a timer's limit: past it Node fires at once, and a lease of months (a third of it per
      // period, half a period per tick) would be extended in a loop, a store call every millisecond. A
      // shorter tick only beats earlier than needed.
      group = new Group(Math.min(Math.max(Math.floor(periodMs / 2), 1), MAX_TIMER_MS), this.scope);
      this.groups.set(periodMs, group);
    }
    group.add(member);
  }

  /** Stop beating `member`. */
  remove(member: Beating, periodMs: number): void {
    // Empty groups go, so that runs with ever-different leases cannot pile groups up.
    if (this.groups.get(periodMs)?.remove(member)) this.groups.delete(periodMs);
  }
}
