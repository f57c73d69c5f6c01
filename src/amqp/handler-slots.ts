/**
 * Handler slots of a RabbitMQ consumer. RabbitMQ pushes up to `prefetch` unacked messages; when the
 * application also sets a lower `concurrency` (a larger prefetch buffer for throughput, fewer handlers at
 * once for a database pool or a payment gateway's rate limit), the messages beyond it wait here, in
 * delivery order, for a free slot. Without a lower `concurrency`, the prefetch alone bounds handlers and
 * every delivery starts at once, as before (no queue on the hot path).
 * @module
 */
import { AsyncResource } from 'node:async_hooks';
import { InFlight } from '../consumer/index.js';

/** A delivery waiting for a slot, and the async context it arrived in. */
interface Waiting<D> {
  delivery: D;
  scope: AsyncResource;
}

/** Starts deliveries, at most `limit` at once; waits for them on close. */
export class HandlerSlots<D> {
  readonly inFlight: InFlight;
  private readonly waiting: Waiting<D>[] = [];
  private readonly gated: boolean;
  // One function for every task's settlement, rather than a closure per task.
  private readonly next = () => this.startWaiting();

  /**
   * @param prefetch - The broker's prefetch: how many deliveries can be unsettled at once.
   * @param concurrency - Handlers at once, when the application set it below the prefetch.
   * @param process - Runs one delivery; never rejects.
   */
  constructor(
    prefetch: number,
    concurrency: number | undefined,
    private readonly process: (delivery: D) => Promise<unknown>,
  ) {
    this.gated = concurrency !== undefined && concurrency < prefetch;
    this.inFlight = new InFlight(this.gated ? (concurrency as number) : prefetch);
  }

  /** Deliveries received and not started yet. */
  get waitingCount(): number {
    return this.waiting.length;
  }

  /** Start `delivery` now, or once a slot frees. */
  deliver(delivery: D): void {
    // Ungated, the prefetch bounds deliveries; the slot of a message just acked may not be given back yet.
    if (!this.gated) {
      this.inFlight.add(this.process(delivery));
      return;
    }
    if (this.waiting.length === 0 && this.inFlight.tryAcquire()) this.start(delivery);
    // Started later from another delivery's settlement, whose async context that call runs in: the
    // delivery's own (the span the amqplib instrumentation made active for it) is kept to start it in.
    // Started there, its hooks annotated the span of the delivery that freed the slot (its key hash and
    // outcome overwriting that one's), and its own span got nothing.
    else this.waiting.push({ delivery, scope: new AsyncResource('idempotency-kit.amqp-delivery') });
  }

  /**
   * Resolve once no delivery runs or waits for a slot (one waiting starts as soon as a slot frees, so it
   * is waited for too). No timer: behind a handler that never settles, it never resolves.
   */
  async idle(): Promise<void> {
    for (;;) {
      await this.inFlight.whenIdle();
      if (this.waiting.length === 0) return;
      // A slot has just freed, and the next waiting delivery starts in this same turn.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /** Take every delivery not started yet (for the consumer to hand back): none will start. */
  takeWaiting(): D[] {
    return this.waiting.splice(0).map(({ delivery }) => delivery);
  }

  private start(delivery: D): void {
    const running = this.process(delivery);
    this.inFlight.run(() => running);
    // Registered after run()'s own reaction, so it runs once the slot was given back.
    void running.then(this.next, this.next);
  }

  private startWaiting(): void {
    while (this.waiting.length > 0 && this.inFlight.tryAcquire()) {
      const { delivery, scope } = this.waiting.shift() as Waiting<D>;
      scope.runInAsyncScope(() => this.start(delivery));
    }
  }
}
