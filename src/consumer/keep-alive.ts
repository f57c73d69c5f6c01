/**
 * Keeping a delivery's broker timer alive (JetStream `working()`, a Redis Streams entry's idle time) while
 * its handler runs or it waits for a handler slot: one touch at a time, the next one `intervalMs` after the
 * last one settled. A timer that fired on a fixed interval without waiting would, on a hung connection,
 * start a new touch every interval for as long as the handler runs, each one held by the client until the
 * connection fails: an unbounded pile-up of commands and promises behind one slow message.
 *
 * A touch that has not settled an interval after it started is overdue, and reported: waiting for it
 * ended the keep-alive without a word before (the broker's timer is no longer reset, and the broker
 * redelivers the message once it runs out; the redelivery meets the key in the store, in progress under
 * this delivery's lease or completed). The keep-alive still waits for it, one touch at a time, and goes
 * on an interval after it settles, however late.
 *
 * A delivery's timer is kept alive by several keep-alives in turn (NATS: while it waits for a slot, while
 * its key is claimed, while its handler runs; Redis Streams: the last two), each stopped as the next one
 * starts. Each one after the first starts from the last touch before it ({@link KeepAlive.touchedAt}),
 * not from its own start: one that waited a full interval of its own first left a gap of up to two
 * intervals between touches at each hand-off (three through the NATS queue), and with an interval above
 * half the broker's timer (a legal `workingInterval`), the broker redelivered a message this process held.
 * @module
 */
import { MAX_TIMER_MS } from '../core/duration.js';
import { isThenable } from '../core/thenable.js';

/** A running keep-alive; {@link KeepAlive.stop} ends it (a touch already sent still settles). */
export class KeepAlive {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly intervalMs: number;
  private lastTouchAt: number;
  // Bound once: each tick and each settled touch reuses them instead of allocating closures.
  private readonly tick = () => this.touchNow();
  private readonly next = () => {
    clearTimeout(this.timer);
    this.schedule();
  };
  private readonly failed = (error: unknown) => {
    this.onError(error);
    this.next();
  };
  private readonly overdue = () => {
    if (this.stopped) return;
    this.onError(
      new Error(
        `A touch of the broker's timer has not settled within ${this.intervalMs} ms (a third of the ` +
          'timer): the broker may redeliver the message; the next touch waits for this one',
      ),
    );
  };

  /**
   * @param touch - Resets the broker's timer; may return a promise, awaited before the next touch.
   * @param intervalMs - Wait between one touch settling and the next one starting, and how long a touch
   *   may take before it is reported overdue. Capped at 2³¹−1 ms, a timer's limit (past it Node fires at
   *   once, and the broker would be touched in a loop): a longer one only touches sooner.
   * @param onError - Told of a touch that threw, rejected or is overdue (the keep-alive goes on).
   * @param expired - Read before each touch: true ends the keep-alive (the lease was lost, say).
   * @param touchedAt - When the broker's timer was last reset (`performance.now()`), by the keep-alive
   *   this one takes over from ({@link KeepAlive.touchedAt}): the first touch comes an interval after it
   *   (at once if that has passed). Absent: an interval after this one starts, the timer's start.
   */
  constructor(
    private readonly touch: () => Promise<void> | void,
    intervalMs: number,
    private readonly onError: (error: unknown) => void,
    private readonly expired?: () => boolean,
    touchedAt?: number,
  ) {
    this.intervalMs = Math.min(intervalMs, MAX_TIMER_MS);
    if (touchedAt === undefined) {
      this.lastTouchAt = performance.now();
      this.schedule();
    } else {
      this.lastTouchAt = touchedAt;
      this.schedule(Math.max(this.intervalMs - (performance.now() - touchedAt), 0));
    }
  }

  /**
   * When the last touch started (`performance.now()`), or, before any, the time this keep-alive started
   * from: what the next keep-alive of the delivery takes over from. A start rather than a settle: the
   * broker resets its timer somewhere in between, and the earlier time only touches sooner.
   */
  get touchedAt(): number {
    return this.lastTouchAt;
  }

  /** Touch no more. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(delayMs = this.intervalMs): void {
    if (this.stopped) return;
    this.timer = setTimeout(this.tick, delayMs);
    // A message being kept alive must not keep the process alive by itself.
    this.timer.unref();
  }

  private touchNow(): void {
    if (this.stopped) return;
    if (this.expired?.()) {
      this.stop();
      return;
    }
    let result: Promise<void> | void;
    this.lastTouchAt = performance.now();
    try {
      result = this.touch();
    } catch (error) {
      this.failed(error);
      return;
    }
    if (!isThenable(result)) {
      this.schedule();
      return;
    }
    // The next touch waits for this one: at most one in flight, however long the connection hangs. One
    // that takes longer than an interval is reported.
    this.timer = setTimeout(this.overdue, this.intervalMs);
    this.timer.unref();
    Promise.resolve(result).then(this.next, this.failed);
  }
}
