/**
 * Resetting a delivery's idle time from the moment it starts, before its handler runs: while the store's
 * claim of its key is made (and, for a decision taken without running the handler, until it is carried
 * out). The shared keep-alive starts only once the handler starts (consumer/process.ts), and the entry's
 * idle time runs from its read: a claim slower than about two thirds of `minIdle` let this process's own
 * claim round take the entry it was handling. Each such round counted a delivery (`XCLAIM`), and started a
 * second one, which met the key in progress and set the entry's idle time close to `minIdle` for its retry,
 * so that the next round took it again: a slow store spent `maxDeliveries` on one healthy delivery, and
 * the entry's next failure was dead-lettered at once.
 *
 * Stopped when the handler starts (its own keep-alive goes on from there, stopped when its lease is lost:
 * a hung handler's entry is left to a claim round again) and before a retry sets the idle time its delay
 * needs; bounded by `storeTimeout` otherwise, past which the delivery is handed back as a retry.
 * @module
 */

import type { ResolvedConsumerOptions } from '../consumer/index.js';
import { KeepAlive } from '../consumer/keep-alive.js';
import { emitHook } from '../consumer/settle.js';
import type { StreamEntry } from './redis-client.js';

/**
 * Start resetting the idle time of `entry` (delivered `deliveryCount` times) through `touch`, every
 * `intervalMs`; a touch that fails or is overdue is reported to `onBrokerError` (operation `touch`), as the
 * shared keep-alive's are. Returns what stops it.
 */
export function touchWhileClaiming(
  resolved: ResolvedConsumerOptions<StreamEntry>,
  entry: StreamEntry,
  deliveryCount: number,
  touch: () => Promise<void>,
  intervalMs: number,
): () => void {
  const keepAlive = new KeepAlive(touch, intervalMs, (error) =>
    emitHook(resolved.hooks, 'onBrokerError', {
      consumer: resolved.name,
      message: entry,
      // Not extracted yet: the shared runner does it, once this delivery is under way.
      key: undefined,
      deliveryCount,
      operation: 'touch',
      error,
    }),
  );
  return () => keepAlive.stop();
}
