/**
 * Keeping a delivery's broker timer alive (JetStream `working()`, a Redis Streams entry's idle time) while
 * its handler runs or it waits for a handler slot: one touch at a time, the next one `intervalMs` after the
 * last one settled. A timer that fired on a fixed interval without waiting would, on a hung connection,
 * start a new touch every interval for as long as the handler runs, each one held by the client until the
 * connection fails: an unbounded pile-up of commands and promises behind one slow message.
 * @module
 */
import { isThenable } from '../core/thenable.js';

/** A running keep-alive; {@link KeepAlive.stop} ends it (a touch already sent still settles). */
export class KeepAlive {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  // Bound once: each tick and each settled touch reuses them instead of allocating closures.
  private readonly tick = () => this.touchNow();
  private readonly next = () => this.schedule();
  private readonly failed = (error: unknown) => {
    this.onError(error);
    this.schedule();
  };

  /**
   * @param touch - Resets the broker's timer; may return a promise, awaited before the next touch.
   * @param intervalMs - Wait between one touch settling and the next one starting.
   * @param onError - Told of a touch that threw or rejected (the keep-alive goes on).
   * @param expired - Read before each touch: true ends the keep-alive (the lease was lost, say).
   */
  constructor(
    private readonly touch: () => Promise<void> | void,
    private readonly intervalMs: number,
    private readonly onError: (error: unknown) => void,
    private readonly expired?: () => boolean,
  ) {
    this.schedule();
  }

  /** Touch no more. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(this.tick, this.intervalMs);
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
    try {
      result = this.touch();
    } catch (error) {
      this.failed(error);
      return;
    }
    // The next touch waits for this one: at most one in flight, however long the connection hangs.
    if (isThenable(result)) Promise.resolve(result).then(this.next, this.failed);
    else this.schedule();
  }
}
