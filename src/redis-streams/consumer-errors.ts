/**
 * The consumer's own failure reports (`hooks.onConsumerError`). Their end, as every hook call's, is
 * `close()` resolving (consumer/hook-calls.ts): a report still owed then (a loop command unanswered past
 * `brokerTimeout`, a deleted entry's letter still being written) is dropped. The work goes on; an entry
 * whose letter does not land stays pending, for a live consumer's claim round to report.
 * @module
 */
import type { ResolvedConsumerOptions } from '../consumer/index.js';
import { callHook } from '../core/hooks.js';
import type { RedisStreamsConsumerErrorEvent } from './consumer-options.js';
import type { StreamEntry } from './redis-client.js';

/** Reports a failure of the consumer as a whole (`entryId`: with operation `deleted`). */
export type ReportError = (
  operation: RedisStreamsConsumerErrorEvent['operation'],
  error: unknown,
  entryId?: string,
) => void;

/**
 * The reports of the consumer resolved as `resolved` to its hooks: those `close()` ends (the hooks of
 * `resolved`, not the options' own).
 */
export function consumerErrorReport(resolved: ResolvedConsumerOptions<StreamEntry>): ReportError {
  return (operation, error, entryId) => {
    const event: RedisStreamsConsumerErrorEvent = { consumer: resolved.name, operation, error };
    if (entryId !== undefined) event.entryId = entryId;
    // A hook that throws or rejects is ignored.
    callHook(
      (event: RedisStreamsConsumerErrorEvent) => resolved.hooks.onConsumerError?.(event),
      event,
    );
  };
}
