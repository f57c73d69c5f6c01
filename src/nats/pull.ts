/**
 * The NATS consumer's message loop: it pulls (`fetch`) only as many messages as there are free handler
 * slots not already asked for, so every message JetStream delivers starts at once.
 *
 * Why not `consume()`: its iterator keeps about `max_messages` requested from the server whatever the
 * application does with them, and buffers what arrives. With every slot busy, those messages waited in the
 * process with no `working()`, invisible to it; JetStream redelivered each after `ack_wait` while this
 * process still held it (another consumer then ran it, or this one got a second copy), and every such
 * redelivery counted against `maxDeliveries`. A message never requested waits on the server instead,
 * where no timer runs, for whichever consumer has a free slot.
 *
 * Pulls overlap: a new one starts as slots free up, without waiting for the open ones to fill or expire,
 * so throughput at a high `concurrency` does not wait on one round trip per batch. The invariant is
 * `requested ≤ free`: messages asked for and not yet arrived never outnumber the free slots, and only
 * arrivals take slots, so each arrival finds one.
 * @module
 */
import { type InFlight, sleep } from '../consumer/index.js';
import type { NatsConsumerMessages, NatsJsMsg, NatsPullConsumer } from './nats-types.js';

/** What the loop needs from its consumer. */
export interface PullLoopOptions {
  consumer: NatsPullConsumer;
  inFlight: InFlight;
  /** Handler slots in all: a pull asks for a quarter of them at least, unless none is asked for. */
  concurrency: number;
  /** How long one pull waits on the server for its messages. */
  expiresMs: number;
  /** Pause before pulling again after a failed pull. */
  retryMs: number;
  /** Run a message in the slot taken for it; settles when it was settled. Never rejects. */
  deliver(message: NatsJsMsg): Promise<unknown>;
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

  constructor(private readonly options: PullLoopOptions) {
    this.batch = Math.max(Math.floor(options.concurrency / 4), 1);
    this.done = this.run();
  }

  /** Pull no more: open pulls are closed, and the loop ends once they have handed back their messages. */
  stop(): void {
    this.stopped = true;
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
      const want = inFlight.free - this.requested;
      // Asked in batches while messages are on their way, so a busy consumer does not pull per message.
      if (want > 0 && (this.requested === 0 || want >= this.batch)) {
        this.requested += want;
        void this.pull(want);
        continue;
      }
      await this.changed();
    }
    while (this.pulling > 0) await this.changed();
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

  /** One pull of `count` messages, for `count` free slots already counted in `requested`. Never rejects. */
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
        if (!this.stopped && inFlight.tryAcquire()) {
          const settled = this.options.deliver(message);
          // After deliver() registered the slot's release: the loop looks once the slot is free.
          void settled.then(this.notify, this.notify);
          continue;
        }
        // Arrived after stop(): never started; nak() hands it back now rather than after AckWait.
        try {
          message.nak();
        } catch {
          // The connection is gone: the server redelivers after AckWait anyway.
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
