/**
 * The bound on every Redis call: a call that gets no answer within `timeoutMs` rejects with
 * `StoreUnavailableError` (fail closed, never a hang), and every failure is wrapped in that error. A
 * `ReplicationShortError` (a write applied but not confirmed by enough replicas) is not a failure, and is
 * passed on as it is, for the engine to recognise.
 * @module
 */
import { AsyncResource } from 'node:async_hooks';
import { isReplicationShortError, StoreUnavailableError } from '../core/errors.js';

/**
 * Wraps one command in the store's timeout and error mapping; `decode` (when given) turns the reply into
 * the result, and a reply it cannot decode fails the call like a backend error.
 */
export type Guard = <R, T = R>(
  operation: string,
  call: () => Promise<R>,
  decode?: (reply: R) => T,
) => Promise<T>;

/**
 * What a Redis store call that failed with `error` rejects with: a `ReplicationShortError` as it is (the
 * engine takes its `result` as the answer), anything else as the store's `StoreUnavailableError`, the
 * error as its cause (a `PartialBatchError` there holds each item's answer).
 */
export function storeFailure(operation: string, error: unknown): unknown {
  if (isReplicationShortError(error)) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new StoreUnavailableError(`Redis store: ${operation} failed: ${message}`, {
    cause: error,
  });
}

/**
 * A guard bounding calls by `timeoutMs`. A call that loses the race keeps a rejection handler, so a late
 * failure is never an unhandled rejection. Hot path: one promise per call and no timer of its own (see
 * {@link Deadlines}), no async functions in between (each layer costs the client CPU that bounds
 * throughput).
 */
export function createGuard(timeoutMs: number): Guard {
  const deadlines = new Deadlines(timeoutMs);
  return <R, T = R>(
    operation: string,
    call: () => Promise<R>,
    decode?: (reply: R) => T,
  ): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const waiting = deadlines.add(operation, reject);
      let pending: Promise<R>;
      try {
        pending = call();
      } catch (error) {
        pending = Promise.reject(error);
      }
      pending.then(
        (reply) => {
          // Already rejected for want of an answer: the late reply changes nothing.
          if (!deadlines.settle(waiting)) return;
          if (decode === undefined) {
            resolve(reply as unknown as T);
            return;
          }
          try {
            resolve(decode(reply));
          } catch (error) {
            reject(storeFailure(operation, error));
          }
        },
        (error: unknown) => {
          if (deadlines.settle(waiting)) reject(storeFailure(operation, error));
        },
      );
    });
}

/** One call waiting for its answer, linked in the order of its deadline. */
class Waiting {
  prev: Waiting | undefined = undefined;
  next: Waiting | undefined = undefined;
  settled = false;

  constructor(
    readonly deadline: number,
    readonly operation: string,
    readonly reject: (error: unknown) => void,
  ) {}
}

/**
 * The deadlines of the calls in flight, under one timer. A timer per call (armed, then cleared a
 * millisecond later) cost each request two timer-list operations and a `Timeout` object to collect.
 * Every call gets the same `timeoutMs`, so deadlines come in the order the calls were made: a linked list
 * in call order is sorted by deadline, a settled call unlinks itself in O(1), and the one timer only ever
 * needs to wake up for the oldest call. It is armed for the oldest deadline when the first call arrives,
 * is not moved when that call settles (it then wakes up early, finds a later deadline at the head and
 * sleeps again: under steady load about once per `timeoutMs`), and is cleared when no call is left, so
 * that an idle store never keeps the process alive. A call is rejected when the timer that wakes up at or
 * after its deadline runs, as with a timer of its own.
 */
class Deadlines {
  private head: Waiting | undefined;
  private tail: Waiting | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** When the armed timer is due, on the clock of the deadlines. */
  private due = 0;
  /**
   * The async context the timer is armed in: the store's, from its creation. The timer is armed by the
   * call that finds none in flight, then kept and re-armed from its own callback for as long as any call
   * is; armed in that call's context, it kept the request's AsyncLocalStorage stores (a request, its body)
   * alive after the call was answered, for as long as the store stayed busy. A timed-out call's rejection
   * still reaches its caller in the caller's context (through its own promise).
   */
  private readonly scope = new AsyncResource('idempotency-kit.redis-deadlines');

  constructor(private readonly timeoutMs: number) {}

  /** Start the clock of a call; `reject` is called if it is still waiting at its deadline. */
  add(operation: string, reject: (error: unknown) => void): Waiting {
    const waiting = new Waiting(performance.now() + this.timeoutMs, operation, reject);
    const tail = this.tail;
    if (tail === undefined) {
      this.head = waiting;
    } else {
      tail.next = waiting;
      waiting.prev = tail;
    }
    this.tail = waiting;
    if (this.timer === undefined) this.arm(waiting.deadline, this.timeoutMs);
    return waiting;
  }

  /** The call got its answer: true if it was still waiting (it is no longer), false if it timed out. */
  settle(waiting: Waiting): boolean {
    if (waiting.settled) return false;
    this.unlink(waiting);
    if (this.head === undefined && this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    return true;
  }

  private unlink(waiting: Waiting): void {
    waiting.settled = true;
    const { prev, next } = waiting;
    if (prev === undefined) this.head = next;
    else prev.next = next;
    if (next === undefined) this.tail = prev;
    else next.prev = prev;
    waiting.prev = undefined;
    waiting.next = undefined;
  }

  private arm(due: number, delayMs: number): void {
    this.due = due;
    // In the store's async context, not the call's that happens to arm it (see `scope`).
    this.timer = this.scope.runInAsyncScope(setTimeout, undefined, this.expire, delayMs);
  }

  private readonly expire = (): void => {
    this.timer = undefined;
    // The timer ran, so its due time has come even on a clock that says otherwise (a test's fake timers).
    const now = Math.max(performance.now(), this.due);
    for (let waiting = this.head; waiting !== undefined; waiting = this.head) {
      if (waiting.deadline > now) {
        this.arm(waiting.deadline, Math.ceil(waiting.deadline - now));
        return;
      }
      this.unlink(waiting);
      waiting.reject(
        new StoreUnavailableError(
          `Redis store: ${waiting.operation} got no answer within ${this.timeoutMs} ms`,
          { retryAfterMs: this.timeoutMs },
        ),
      );
    }
  };
}
