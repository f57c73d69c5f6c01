/**
 * Keeps a claim's lease alive while the handler runs (a heartbeat at a third of the lease) and aborts the
 * handler's `AbortSignal` the moment the lease is known to be lost.
 * @module
 */
import type { Store } from '../store/store.js';
import type { Clock } from './clock.js';
import { LeaseLostError, StoreUnavailableError } from './errors.js';
import { emit, type HookEvent, type IdempotencyHooks } from './hooks.js';

/** Everything a {@link LeaseKeeper} needs. */
export interface LeaseKeeperOptions {
  store: Store;
  storageKey: string;
  token: number;
  leaseMs: number;
  leaseUntil: number;
  clock: Clock;
  hooks: IdempotencyHooks;
  event: HookEvent;
  /** Extend automatically in the background. */
  heartbeat: boolean;
}

/** The lease of one claim, from claim to completion or release. */
export class LeaseKeeper {
  // Created on first use: most handlers never look at their signal, and an AbortController per run is a
  // measurable share of the engine's overhead.
  private controller: AbortController | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private leaseUntil: number;

  constructor(private readonly options: LeaseKeeperOptions) {
    this.leaseUntil = options.leaseUntil;
  }

  /** Aborts (with a {@link LeaseLostError} as reason) when the lease is lost. */
  get signal(): AbortSignal {
    this.controller ??= new AbortController();
    return this.controller.signal;
  }

  // Asked without creating the controller: only a handler that reads `signal` needs one.
  private get aborted(): boolean {
    return this.controller?.signal.aborted ?? false;
  }

  /** Start the heartbeat, if enabled. */
  start(): void {
    if (this.options.heartbeat) this.schedule();
  }

  /** Stop the heartbeat; results of an extension still in flight are ignored from now on. */
  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
  }

  /**
   * Extend the lease now by `leaseMs` (default: the claim's lease).
   * @throws LeaseLostError when the store fenced the extension out.
   * @throws StoreUnavailableError when the store could not be reached.
   */
  async extend(leaseMs = this.options.leaseMs): Promise<void> {
    const { store, storageKey, token } = this.options;
    if (this.aborted) throw this.signal.reason;
    let held: boolean;
    try {
      held = await store.extend(storageKey, token, leaseMs);
    } catch (error) {
      emit(this.options.hooks, 'onStoreError', {
        ...this.options.event,
        operation: 'extend',
        error,
      });
      throw new StoreUnavailableError(`Store '${store.name}' failed to extend the lease`, {
        cause: error,
      });
    }
    if (this.stopped) return;
    if (!held) {
      this.lose();
      throw this.signal.reason;
    }
    this.leaseUntil = this.options.clock.now() + leaseMs;
  }

  private schedule(): void {
    const every = Math.max(Math.floor(this.options.leaseMs / 3), 5);
    this.timer = setTimeout(() => void this.beat(), every);
    // A pending heartbeat must never keep a process alive on its own.
    this.timer.unref();
  }

  private async beat(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.extend();
    } catch {
      // A store error is survivable while the lease has time left: try again at the next beat. Once the
      // lease has run out with no successful extension, the claim may be taken over, so abort.
      if (!this.aborted && this.options.clock.now() >= this.leaseUntil) this.lose();
    }
    if (!this.stopped && !this.aborted) this.schedule();
  }

  private lose(): void {
    if (this.aborted) return;
    emit(this.options.hooks, 'onLeaseLost', { ...this.options.event, token: this.options.token });
    this.controller ??= new AbortController();
    this.controller.abort(new LeaseLostError(this.options.token));
  }
}
