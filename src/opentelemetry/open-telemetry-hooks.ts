/**
 * Engine hooks that annotate the active OpenTelemetry span with each run's outcome: the trace attribute of
 * the design's observability checklist, plus span events for takeovers, lost leases, store errors,
 * steps and writes short of their replicas. It uses only `@opentelemetry/api`, so it writes to whatever
 * SDK and instrumentations the application set up (the HTTP server span of
 * `@opentelemetry/instrumentation-http`, a consumer span, your own), and does nothing when there is none.
 * @module
 */
import { type Attributes, type Span, trace } from '@opentelemetry/api';
import { type HookEvent, type IdempotencyHooks, RunOutcomeName } from '../core/hooks.js';
import { knownFields } from '../core/option-checks.js';
import { IdempotencyAttribute, IdempotencyEvent } from './attributes.js';
import { errorAttributes, recording } from './span-writes.js';

/** Options of {@link openTelemetryHooks}. */
export interface OpenTelemetryHooksOptions {
  /**
   * The span to annotate for an event. @default the active span (`trace.getActiveSpan()`): the hooks run
   * in the run's own async context, so this is the span that was active when the run started.
   */
  spanOf?: (event: HookEvent) => Span | undefined;
}

// Every key of OpenTelemetryHooksOptions, checked by the compiler both ways: a misspelt option is refused instead of
// leaving its default in force.
const OPEN_TELEMETRY_HOOKS_FIELDS = Object.keys({
  spanOf: true,
} as const satisfies Record<keyof OpenTelemetryHooksOptions, true>);

/**
 * Hooks that set `idempotency.*` attributes on the active span of each run (the outcome, the hashed key,
 * the attempt) and add span events for takeovers, lost leases, store errors, steps (recorded or
 * replayed, with the step's name) and writes short of their replicas. Pass them as `hooks`,
 * alone or with others through `combineHooks`.
 *
 * @param options.spanOf which span to annotate (default: the active span)
 * @see docs/observability.md
 * @example
 * import { createIdempotency } from 'idempotency-kit';
 * import { openTelemetryHooks } from 'idempotency-kit/opentelemetry';
 *
 * const idempotency = createIdempotency({ store, hooks: openTelemetryHooks() });
 */
export function openTelemetryHooks(options: OpenTelemetryHooksOptions = {}): IdempotencyHooks {
  knownFields(options, 'openTelemetryHooks', OPEN_TELEMETRY_HOOKS_FIELDS);
  const spanOf = options.spanOf ?? (() => trace.getActiveSpan());
  /** Annotate the event's span, if it records, with the run's identity, its outcome and `extra`. */
  const annotateRun = (event: HookEvent, outcome: string | undefined, extra: Attributes) => {
    const span = recording(spanOf(event));
    span?.setAttributes({
      [IdempotencyAttribute.Namespace]: event.namespace,
      [IdempotencyAttribute.KeyHash]: event.storageKey,
      ...(outcome === undefined ? {} : { [IdempotencyAttribute.Outcome]: outcome }),
      ...extra,
    });
    return span;
  };

  return {
    onExecuted(event) {
      annotateRun(event, RunOutcomeName.Executed, {
        [IdempotencyAttribute.Attempt]: event.attempt,
        [IdempotencyAttribute.Token]: event.token,
      });
    },
    onReplayed(event) {
      annotateRun(event, RunOutcomeName.Replayed, {
        [IdempotencyAttribute.ReplaySource]: event.fromCache ? 'cache' : 'store',
      });
    },
    onFailed(event) {
      annotateRun(event, RunOutcomeName.Failed, {
        [IdempotencyAttribute.Attempt]: event.attempt,
        [IdempotencyAttribute.Token]: event.token,
        [IdempotencyAttribute.ErrorStored]: event.stored,
      });
    },
    onConflict(event) {
      annotateRun(event, RunOutcomeName.InProgress, {
        [IdempotencyAttribute.RetryAfterMs]: event.retryAfterMs,
      });
    },
    onMismatch(event) {
      annotateRun(event, RunOutcomeName.Mismatch, {});
    },
    onFailOpen(event) {
      annotateRun(event, RunOutcomeName.FailOpen, {});
    },
    onTakeover(event) {
      annotateRun(event, undefined, {})?.addEvent(IdempotencyEvent.Takeover, {
        [IdempotencyAttribute.Attempt]: event.attempt,
        [IdempotencyAttribute.Token]: event.token,
      });
    },
    onLeaseLost(event) {
      annotateRun(event, undefined, {})?.addEvent(IdempotencyEvent.LeaseLost, {
        [IdempotencyAttribute.Token]: event.token,
      });
    },
    onStoreError(event) {
      annotateRun(event, undefined, {})?.addEvent(IdempotencyEvent.StoreError, {
        [IdempotencyAttribute.Operation]: event.operation,
        ...errorAttributes(event.error),
      });
    },
    onStepRecorded(event) {
      annotateRun(event, undefined, {})?.addEvent(IdempotencyEvent.Step, {
        [IdempotencyAttribute.StepName]: event.step,
        [IdempotencyAttribute.StepReplayed]: false,
        [IdempotencyAttribute.StepDurationMs]: event.durationMs,
        [IdempotencyAttribute.Attempt]: event.attempt,
      });
    },
    onStepReplayed(event) {
      annotateRun(event, undefined, {})?.addEvent(IdempotencyEvent.Step, {
        [IdempotencyAttribute.StepName]: event.step,
        [IdempotencyAttribute.StepReplayed]: true,
        [IdempotencyAttribute.Attempt]: event.attempt,
      });
    },
    onReplicationShort(event) {
      annotateRun(event, undefined, {})?.addEvent(IdempotencyEvent.ReplicationShort, {
        [IdempotencyAttribute.Operation]: event.operation,
        [IdempotencyAttribute.Token]: event.token,
        [IdempotencyAttribute.ReplicasAcknowledged]: event.acknowledged,
        [IdempotencyAttribute.ReplicasRequired]: event.required,
      });
    },
  };
}
