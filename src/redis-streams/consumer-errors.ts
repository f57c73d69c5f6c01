/**
 * The consumer's own failure reports (`hooks.onConsumerError`), and their end: once `close()` resolved,
 * nothing more is reported.
 *
 * Why: `close()` resolving `false` leaves work running (a loop command unanswered past `brokerTimeout`, a
 * deleted entry's letter still being written), and its reports came afterwards, to an application that had
 * closed the consumer and may have torn down what its hook reports to. The work goes on; its reports are
 * dropped. An entry whose letter does not land stays pending, for a live consumer's claim round to report.
 * @module
 */
import { callHook } from '../core/hooks.js';
import type {
  RedisStreamsConsumerErrorEvent,
  RedisStreamsConsumerHooks,
} from './consumer-options.js';

/** Reports a failure of the consumer as a whole (`entryId`: with operation `deleted`). */
export type ReportError = (
  operation: RedisStreamsConsumerErrorEvent['operation'],
  error: unknown,
  entryId?: string,
) => void;

/** A consumer's reports, and their end. */
export interface ConsumerErrorReports {
  /** Reports to `hooks.onConsumerError`, until {@link ConsumerErrorReports.end}. */
  report: ReportError;
  /** Ends the reports: called as `close()` resolves. */
  end(): void;
}

/** The reports of the consumer named `consumer` (its `name` option) to `hooks`. */
export function consumerErrorReports(
  consumer: string,
  hooks: RedisStreamsConsumerHooks | undefined,
): ConsumerErrorReports {
  let ended = false;
  return {
    report: (operation, error, entryId) => {
      if (ended) return;
      const event: RedisStreamsConsumerErrorEvent = { consumer, operation, error };
      if (entryId !== undefined) event.entryId = entryId;
      // A hook that throws or rejects is ignored.
      callHook((event: RedisStreamsConsumerErrorEvent) => hooks?.onConsumerError?.(event), event);
    },
    end: () => {
      ended = true;
    },
  };
}
