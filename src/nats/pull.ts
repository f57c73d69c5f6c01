/**
 * The NATS consumer's message loop: it pulls (`fetch`) as many messages as there are free handler slots
 * not already asked for, plus at most `concurrency` and a batch more, and keeps those that arrive with no free slot alive
 * with `working()` in a local queue (waiting.ts) until one frees up.
 *
 * Why not `consume()`: its iterator keeps about `max_messages` requested from the server whatever the
 * application does with them, and buffers what arrives. With every slot busy, those messages waited in the
 * process with no `working()`, invisible to it; JetStream redelivered each after `ack_wait` while this
 * process still held it (another consumer then ran it, or this one got a second copy), and every such
 * redelivery counted against `maxDeliveries`. Here every message pulled either runs or waits in the
 * local queue with `working()`, and `stop()` hands the waiting ones back at once.
 *
 * Why ahead of the slots: asking only for free slots (`requested ≤ free`) left every slot that freed up
 * empty for a round trip to the server, which halved throughput at every concurrency through a 4 ms
 * round trip. With `requested + waiting ≤ free + ahead` the next messages are on their way, or here, when
 * a slot frees; at most `ahead` messages wait here, each one kept alive, none invisible to the process.
 *
 * Pulls overlap: a new one starts as slots free up, without waiting for the open ones to fill or expire,
 * so throughput at a high `concurrency` does not wait on one round trip per batch.
 * @module
 */
import { type InFlight, sleep } from '../consumer/index.js';
import type { NatsConsumerMessages, NatsJsMsg, NatsPullConsumer } from './nats-types.js';
import { type WaitedFor, WaitingQueue } from './waiting.js';

/** What the loop needs from its consumer. */
export interface PullLoopOptions {
  consumer: NatsPullConsumer;
  inFlight: InFlight;
  /** Handler slots in all: a pull asks for a quarter of them at least, unless none is asked for. */
  concurrency: number;
  /** Wait between `working()` calls on a message waiting for a slot (the handlers' touch interval). */
  touchIntervalMs: number;
  /**
   * `working()` on a message waiting for a slot; throws an error named `ClosedConnectionError` once the
   * connection is closed, which ends the loop.
   */
  touch(message: NatsJsMsg): void;
  /** Longest wait with no slot freeing up: past it a message is handed back, and none asked for ahead. */
  maxWaitMs: number;
  /**
   * Whether `message` may be handed back after `maxWaitMs`: not on the last delivery the server's
   * `max_deliver` allows, where the server drops a message handed back. It waits for a slot instead.
   */
  mayHandBack(message: NatsJsMsg): boolean;
  /**
   * Called with a message about to be handed back (after `maxWaitMs`, or by {@link PullLoop.stop}), never
   * started here: records it, so that this delivery does not count against `maxDeliveries`. The `nak()`
   * waits for it, and the loop's end for every `nak()`. Never rejects.
   */
  handingBack(message: NatsJsMsg): Promise<void>;
  /**
   * Called instead of {@link handingBack}, and of the `nak()`, with a message {@link PullLoop.stop} hands
   * back on the last delivery `max_deliver` allows (see {@link mayHandBack}): the server drops it at the
   * `nak()`, so no record is made for a redelivery that never comes; it sends the `nak()` and reports
   * the message. Before, such a message, waiting for a slot at `close()`, was dropped in silence.
   */
  handingBackLast(message: NatsJsMsg): void;
  /** A `working()` on a message waiting for a slot threw (not for a closed connection: that ends the loop). */
  onTouchError(message: NatsJsMsg, error: unknown): void;
  /** How long one pull waits on the server for its messages (at most the consumer's `max_expires`). */
  expiresMs: number;
  /**
   * Most messages one pull asks for: the consumer's `max_batch` (the server refuses a pull for more),
   * `Infinity` without one. More are asked for by several pulls.
   */
  maxBatch: number;
  /** Pause before pulling again after a failed pull. */
  retryMs: number;
  /**
   * Run a message in the slot taken for it; settles when it was settled. Never rejects. `touchedAt`: when
   * it was last touched while it waited for the slot (`performance.now()`), its next touch due an interval
   * after it; absent for a message that never waited.
   */
  deliver(message: NatsJsMsg, touchedAt?: number): Promise<unknown>;
  /** A pull failed for a reason that may pass; the loop pulls again after `retryMs`. */
  onRetry(error: unknown): void;
  /** The consumer's name, for the error of a closed connection. */
  name: string;
}

/** Names of the NATS client's errors that end the loop: nothing left to pull from, or no connection. */
const TERMINAL = new Set(['ConsumerNotFoundError', 'StreamNotFoundError', 'ClosedConnectionError']);

/** A pull loop; {@link PullLoop.stop} ends it, handing back what an open pull still brings. */
export class PullLoop {
  /** Resolves once stopped; rejects when the consumer, its stream or the connection is gone. */
  readonly done: Promise<void>;
  private stopped = false;
  private failure: { error: unknown } | undefined;
  /** Messages asked for by open pulls and not arrived yet. */
  private requested = 0;
  private readonly open = new Set<NatsConsumerMessages>();
  /** Hand-backs whose record is being written: their `nak()` follows it. */
  private readonly handBacks = new Set<Promise<void>>();
  private pulling = 0;
  private pausedUntil = 0;
  private readonly pause = new AbortController();
  // Something changed (a slot freed, a pull ended, stop): the loop looks again. One waiter, the loop.
  private wake: (() => void) | undefined;
  private dirty = false;
  private readonly notify = () => {
    this.dirty = true;
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  };
  private readonly batch: number;
  /** Messages asked for, or waiting here, beyond the free slots at most. */
  private readonly ahead: number;
  private readonly waiting: WaitingQueue;
  // True from a message handed back after waiting `maxWaitMs` until a slot frees: the slots are stuck
  // (hung handlers, say), and a message pulled ahead would only wait here too, instead of going to a
  // consumer with a free slot. Only free slots are asked for meanwhile (none, while all are stuck).
  private stalled = false;
  // A handler's slot was released: the oldest waiting message takes it, then the loop looks again.
  private readonly freed = () => {
    this.stalled = false;
    this.waiting.progressed();
    this.startWaiting();
    this.notify();
  };

  constructor(private readonly options: PullLoopOptions) {
    // Never above max_batch: a batch the server refuses to pull would leave the rest never asked for.
    this.batch = Math.min(Math.max(Math.floor(options.concurrency / 4), 1), options.maxBatch);
    // What `consume({ max_messages: concurrency })` kept asked for before, so as many messages per second
    // (see docs/consumers/nats.md for the figures): `concurrency` ahead, plus the batch this loop lets
    // build up before asking again. A quarter of `concurrency` ahead was 45% (conc 10) and 29% (conc 100)
    // slower through a 4 ms round trip; `concurrency` alone 10% slower at conc 10 and 35% at conc 1 with
    // 5 ms handlers.
    this.ahead = options.concurrency + this.batch;
    this.waiting = new WaitingQueue(
      options.touch,
      options.touchIntervalMs,
      (message, error) => {
        // With every slot busy and the messages ahead here, no pull is open to fail: a waiting message's
        // touch is what notices, within one interval, that the connection closed. Before, its working()
        // went nowhere in silence, and the loop ended only once a handler finished, if ever.
        if (isTerminal(error)) void this.failed(error);
        else options.onTouchError(message, error);
      },
      options.maxWaitMs,
      (message) => {
        // The open pulls are closed first: one still asking for messages would get this one back.
        this.stalled = true;
        for (const messages of this.open) this.close(messages);
        this.handBack(message);
        this.notify();
      },
      options.mayHandBack,
    );
    this.done = this.run();
  }

  /**
   * Pull no more: the messages waiting for a slot are handed back (`nak()`), open pulls are closed, and
   * the loop ends once they have handed back what they still bring.
   */
  stop(): void {
    this.stopped = true;
    this.waiting.drain((message) => this.handBack(message));
    this.pause.abort();
    for (const messages of this.open) this.close(messages);
    this.notify();
  }

  private async run(): Promise<void> {
    const { inFlight } = this.options;
    while (!this.stopped) {
      const wait = this.pausedUntil - Date.now();
      if (wait > 0) {
        await sleep(wait, this.pause.signal);
        continue;
      }
      const ahead = this.stalled ? 0 : this.ahead;
      const want = inFlight.free + ahead - this.requested - this.waiting.size;
      // Asked in batches while messages are on their way, so a busy consumer does not pull per message.
      if (want > 0 && (this.requested === 0 || want >= this.batch)) {
        // Past max_batch the server refuses the whole pull (409), every time: the rest is asked for by
        // the next pulls, as the loop comes round again.
        const count = Math.min(want, this.options.maxBatch);
        this.requested += count;
        void this.pull(count);
        continue;
      }
      if (this.pulling === 0) await this.idleWithoutPull();
      else await this.changed();
    }
    while (this.pulling > 0) await this.changed();
    // Each bounded by the store timeout (recordHandedBack): close() waits for the nak()s to go out.
    await Promise.all(this.handBacks);
    if (this.failure !== undefined) throw this.failure.error;
  }

  private changed(): Promise<void> {
    if (this.dirty) {
      this.dirty = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      this.wake = () => {
        this.dirty = false;
        resolve();
      };
    });
  }

  /**
   * Wait for a change with no pull open: every slot busy and what is asked for ahead already here, or the
   * slots stuck after a hand-back. No pull can fail then, and a waiting message's `working()` only notices
   * a closed connection, not a deleted consumer: before, one deleted in that state went unnoticed until a
   * slot freed (never, behind a hung handler). So the consumer's info is asked for once a touch interval
   * while it lasts (one request per interval, only in this state).
   */
  private async idleWithoutPull(): Promise<void> {
    let due = false;
    const timer = setTimeout(() => {
      due = true;
      this.notify();
    }, this.options.touchIntervalMs);
    try {
      await this.changed();
    } finally {
      clearTimeout(timer);
    }
    if (!due || this.stopped || this.pulling > 0) return;
    try {
      await this.options.consumer.info(false);
    } catch (error) {
      // Only a loss ends the loop; an unanswered request (an outage) is left to the next check.
      if (isTerminal(error)) await this.failed(error);
    }
  }

  /** One pull of `count` messages, already counted in `requested`. Never rejects. */
  private async pull(count: number): Promise<void> {
    const { consumer, inFlight, expiresMs } = this.options;
    this.pulling++;
    let arrived = 0;
    let messages: NatsConsumerMessages | undefined;
    try {
      messages = await consumer.fetch({ max_messages: count, expires: expiresMs });
      this.open.add(messages);
      // stop() may have come while the pull was being set up: what it still brings is handed back.
      if (this.stopped) this.close(messages);
      for await (const message of messages) {
        arrived++;
        this.requested--;
        if (this.stopped) {
          // Arrived after stop(): never started; handed back now rather than after AckWait.
          this.handBack(message);
        } else if (this.waiting.size === 0 && inFlight.tryAcquire()) {
          this.start(message);
        } else {
          // Behind the ones already waiting: messages start in the order they arrived.
          this.waiting.push(message);
        }
      }
    } catch (error) {
      if (!this.stopped) await this.failed(error);
    } finally {
      if (messages !== undefined) this.open.delete(messages);
      // Expired, or failed, short of `count`: those slots may be asked for again.
      this.requested -= count - arrived;
      this.pulling--;
      this.notify();
    }
  }

  /**
   * Hand `message`, never started here, back to the server: recorded first (`handingBack`), so that this
   * delivery does not count against `maxDeliveries` (the redelivery, here or elsewhere, must find the
   * record if it fails), then `nak()`ed. Behind stuck slots, and on close(): before, the messages close()
   * handed back were counted, so a service restarted (a deploy) while messages waited for a slot
   * dead-lettered them after fewer runs than `maxDeliveries`.
   */
  private handBack(message: NatsJsMsg): void {
    // Only stop() hands such a message back: one waiting for a slot never expires (WaitingQueue).
    if (!this.options.mayHandBack(message)) {
      this.options.handingBackLast(message);
      return;
    }
    const handedBack = this.options.handingBack(message).then(() => nak(message));
    this.handBacks.add(handedBack);
    void handedBack.then(() => this.handBacks.delete(handedBack));
  }

  /** Run `message` in the slot just taken for it (last touched at `touchedAt`, if it waited). */
  private start(message: NatsJsMsg, touchedAt?: number): void {
    const settled = this.options.deliver(message, touchedAt);
    // After deliver() registered the slot's release: the slot is free when `freed` runs.
    void settled.then(this.freed, this.freed);
  }

  /** Start waiting messages, oldest first, in the slots free now. */
  private startWaiting(): void {
    while (!this.stopped && this.waiting.size > 0 && this.options.inFlight.tryAcquire()) {
      const { message, touchedAt } = this.waiting.shift() as WaitedFor;
      this.start(message, touchedAt);
    }
  }

  private close(messages: NatsConsumerMessages): void {
    messages.close().catch(() => {
      // Already closed with the connection: nothing more comes from it.
    });
  }

  /**
   * A pull failed. Missed heartbeats say little by themselves (an outage, or a consumer deleted while
   * none of its pulls was open): the consumer's info tells which. A loss ends the loop; anything else
   * is reported and pulled again after a pause.
   */
  private async failed(error: unknown): Promise<void> {
    let cause = error;
    if (!isTerminal(cause)) {
      try {
        await this.options.consumer.info(false);
      } catch (infoError) {
        if (isTerminal(infoError)) cause = infoError;
      }
    }
    if (this.stopped) return;
    if (!isTerminal(cause)) {
      this.options.onRetry(error);
      this.pausedUntil = Date.now() + this.options.retryMs;
      return;
    }
    this.failure =
      (cause as Error).name === 'ClosedConnectionError'
        ? {
            // Said in the application's terms: the loop ends because the connection did.
            error: new Error(
              `the message loop of consumer '${this.options.name}' ended without close(): the NATS connection closed`,
              { cause },
            ),
          }
        : { error: cause };
    this.stop();
  }
}

/** Hand `message` back to the server now, rather than after AckWait. */
function nak(message: NatsJsMsg): void {
  try {
    message.nak();
  } catch {
    // The connection is gone: the server redelivers after AckWait anyway.
  }
}

/** Whether `error` means the loop cannot go on: the consumer, its stream or the connection is gone. */
function isTerminal(error: unknown): boolean {
  const { name, code, message } = (error ?? {}) as {
    name?: unknown;
    code?: unknown;
    message?: unknown;
  };
  if (typeof name === 'string' && TERMINAL.has(name)) return true;
  // A consumer deleted while a pull was open: the server's 409 status.
  return code === 409 && /consumer deleted/i.test(String(message));
}
