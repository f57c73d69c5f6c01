/**
 * A consumer's calls into its application's hooks, and their end: `close()` resolving. The one place that
 * knows a consumer closed; every hook call of the shared module and of the three adapters goes through the
 * hooks this wraps (`ResolvedConsumerOptions.hooks`).
 *
 * Why: `close()` resolving `false` (its drain timed out) leaves work running: a handler past
 * `drainTimeout`, a completion the engine still retries, a dead letter or retry given up on after
 * `brokerTimeout`, a loop command unanswered. That work goes on (a late ack, a letter landing), but its
 * reports came afterwards, to an application that had closed the consumer and may have torn down what its
 * hooks report to (a metrics registry, a tracer provider, a logger). From `close()` resolving on, none is
 * called; the broker and the store hold what happened, for the next consumer's deliveries to report.
 * @module
 */
import type { ConsumerHooks } from './options.js';

// Every hook a consumer calls, checked by the compiler both ways: a hook added to ConsumerHooks cannot be
// left out of the wrapping (and so keep firing after close()), nor a removed one stay here. The adapters'
// own hook types only narrow `onConsumerError`'s event.
const HOOK_FIELDS = {
  onExecuted: true,
  onDuplicate: true,
  onRetry: true,
  onDeadLetter: true,
  onBrokerError: true,
  onConsumerError: true,
} as const satisfies Record<keyof ConsumerHooks<unknown>, true>;
const HOOK_NAMES = Object.keys(HOOK_FIELDS) as Array<keyof ConsumerHooks<unknown>>;

/** A consumer's hooks as it calls them, and the switch that ends every call. */
export interface HookCalls<M> {
  /**
   * The application's hooks, each wrapped so that it does nothing once {@link HookCalls.end} was called.
   * Only the hooks the application set are present: an unobserved event stays unobserved.
   */
  readonly hooks: ConsumerHooks<M>;
  /** Ends every call into the hooks, for good: called as the consumer's `close()` resolves. */
  end(): void;
}

/** The calls into `hooks`, until ended. */
export function hookCalls<M>(hooks: ConsumerHooks<M>): HookCalls<M> {
  let ended = false;
  const gated: Record<string, (event: unknown) => unknown> = {};
  for (const name of HOOK_NAMES) {
    if (typeof hooks[name] !== 'function') continue;
    // Read at each call, and called as a method of `hooks`, as the adapters called it before: a hooks
    // object of a class of the application's own keeps its `this`.
    gated[name] = (event) => {
      if (ended) return undefined;
      return (hooks[name] as (this: ConsumerHooks<M>, event: unknown) => unknown).call(
        hooks,
        event,
      );
    };
  }
  return {
    hooks: gated as ConsumerHooks<M>,
    end: () => {
      ended = true;
    },
  };
}
