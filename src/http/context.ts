/**
 * `currentIdempotency()`: the key, scope and derived downstream keys of the request being handled, reachable
 * from anywhere in the handler's asynchronous call tree (AsyncLocalStorage), so the handler can carry the
 * key into the messages it publishes and the providers it calls.
 *
 * Opt-in (`asyncContext: true`): on Node 20 and 22 an active AsyncLocalStorage installs promise hooks that
 * slow down every promise in the process (measured: about 3× fewer requests per second for a 0 ms Express
 * handler). The same context is always available for free on the framework's own request object.
 * @module
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Duration } from '../core/duration.js';
import type { RunContext } from '../core/engine.js';
import { InvalidOptionsError } from '../core/errors.js';

/** What a handler running under the idempotency layer can learn about its execution. */
export interface IdempotencyContext {
  /** The client's key, as parsed from the header. */
  readonly key: string;
  /** The scope the key lives in (the default is a digest of the caller's credentials). */
  readonly scope: string;
  /** The hashed storage key. */
  readonly storageKey: string;
  /** Fencing token of this execution (0 when it runs unprotected because the store failed open). */
  readonly token: number;
  /** 1 for the first execution, more after takeovers of crashed attempts. */
  readonly attempt: number;
  /** Aborts when this execution's lease is lost. */
  readonly signal: AbortSignal;
  /** A stable key for a downstream system's own deduplication, the same on every attempt. */
  downstreamKey(step: string): string;
  /** Extend the lease now (long handlers; a heartbeat already does it by default). */
  extendLease(leaseMs?: Duration): Promise<void>;
  /**
   * Run a named step once per request: a retry that takes over a crashed attempt (same request, after the
   * lease) gets the step's recorded result instead of running it again (see `RunContext.step`).
   * @example
   * const charge = await ctx.step('charge', ({ downstreamKey }) =>
   *   payments.charge(order, { idempotencyKey: downstreamKey }),
   * );
   */
  step: RunContext['step'];
}

const storage = new AsyncLocalStorage<IdempotencyContext | undefined>();
let enabled = false;

/** Called when an adapter (or a consumer) is created with `asyncContext: true`. */
export function enableAsyncContext(): void {
  enabled = true;
}

/**
 * Whether an adapter (or a consumer) was created with `asyncContext: true`: until then no context is set
 * anywhere, and code that would clear one has nothing to clear.
 */
export function isAsyncContextEnabled(): boolean {
  return enabled;
}

/**
 * Run `fn` with `context` as the current idempotency context; with `undefined`, with none (a consumer's
 * handler without the option, which must not see the context of a request it was started under).
 */
export function runWithContext<T>(context: IdempotencyContext | undefined, fn: () => T): T {
  return storage.run(context, fn);
}

/**
 * The idempotency context of the request being handled, or `undefined` outside one (no key, a method the
 * layer ignores, a route without `asyncContext: true`, or code not running under a request). Also set in
 * the handler of a transactional route, and of an idempotent consumer (RabbitMQ, NATS JetStream, Redis
 * Streams), created with `asyncContext: true`: there, the handler's own context, its `scope` the
 * consumer's.
 * @throws InvalidOptionsError when no adapter was created with `asyncContext: true` (the context would
 *   silently be missing otherwise).
 * @example
 * const ctx = currentIdempotency();
 * await publish('order.created', order, { messageId: ctx?.downstreamKey('order.created') });
 */
export function currentIdempotency(): IdempotencyContext | undefined {
  if (!enabled) {
    throw new InvalidOptionsError(
      'currentIdempotency() needs `asyncContext: true` in the idempotency middleware options, ' +
        "in a transactional route's or in an idempotent consumer's (or read the context from the " +
        "request: req.idempotency, request.idempotency, idempotencyOf(request), c.get('idempotency'); " +
        "in a transactional route, from tx; in a consumer, from its handler's context argument)",
    );
  }
  return storage.getStore();
}
