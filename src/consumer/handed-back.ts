/**
 * Deliveries handed back without running, recorded in the idempotency store so that they do not count
 * against `maxDeliveries`. The NATS consumer hands back (`nak()`) a message that waited behind handler
 * slots stuck for three `ack_wait`s; JetStream counts that as a delivery like any other, so a message of a
 * slow pool got a handler retry fewer per hand-back (with `maxDeliveries: 2`, one hand-back and one failed
 * run dead-lettered it after a single run).
 *
 * Why the store: the redelivery may go to another process, and the broker cannot say why a delivery ended.
 * Why it is sound: a record is written only by the process that held that delivery and never started it,
 * before it hands the delivery back, so each record names a delivery whose handler never ran; the runs of a
 * message stay at most `maxDeliveries`. A record that could not be written, or read, only gives the old,
 * stricter count. Records are read only when a handler error would dead-letter a redelivery: the path of
 * every other delivery costs nothing.
 * @module
 */
import type { RunRequest } from '../core/engine.js';
import { KeyState } from '../core/inspection.js';
import { ReservedScopePrefix } from '../core/reserved-scopes.js';
import { type MaybeUnreported, UNREPORTED_RUN } from '../core/unreported-runs.js';
import type { ResolvedConsumerOptions } from './options.js';
import { withinStoreTimeout } from './store-deadline.js';

/**
 * The scope of consumer `name`'s records of handed-back deliveries: not under `consumer:`, and reserved,
 * so no HTTP scope can address it (core/reserved-scopes.ts).
 */
export function handedBackScope(name: string): string {
  return `${ReservedScopePrefix.HandedBack}${name}`;
}

function request<M>(
  options: ResolvedConsumerOptions<M>,
  brokerId: string,
  deliveryCount: number,
): RunRequest {
  const request: RunRequest & MaybeUnreported = {
    key: `${brokerId}#${deliveryCount}`,
    scope: handedBackScope(options.name),
    storeErrors: false,
    failOpen: false,
    // The consumer's own record, not a run of the application: not reported as one.
    [UNREPORTED_RUN]: true,
  };
  if (options.retentionMs !== undefined) request.retentionMs = options.retentionMs;
  return request;
}

const RECORDED = () => true;

/**
 * Record that delivery `deliveryCount` of the message `brokerId` is handed back without its handler
 * having run. Call it before handing the delivery back. Never rejects: a record that cannot be written
 * leaves that delivery counted.
 */
export async function recordHandedBack<M>(
  options: ResolvedConsumerOptions<M>,
  brokerId: string,
  deliveryCount: number,
): Promise<void> {
  try {
    // Waited for at most `storeTimeout`: the delivery is handed back after it either way, and a record
    // answering later is as good (the redelivery reads it only when a handler error would dead-letter).
    await withinStoreTimeout(
      options.engine.run(request(options, brokerId, deliveryCount), RECORDED),
      options.storeTimeoutMs,
    );
  } catch {
    // Counted as a delivery, as before records existed.
  }
}

/**
 * Earlier deliveries looked at, at most: the most recent ones. A message redelivered many times (waiting
 * behind a long holder, or through a store outage) must not cost a read per delivery it ever had.
 */
const MAX_READS = 32;

/**
 * How many of the (at most {@link MAX_READS}) deliveries of the message `brokerId` just before delivery
 * `deliveryCount` were handed back without running: one store read per delivery, in parallel. Never
 * rejects: a store that cannot be read credits none.
 */
export async function handedBackBefore<M>(
  options: ResolvedConsumerOptions<M>,
  brokerId: string,
  deliveryCount: number,
): Promise<number> {
  const scope = handedBackScope(options.name);
  const reads: Array<Promise<boolean>> = [];
  for (let count = Math.max(deliveryCount - MAX_READS, 1); count < deliveryCount; count++) {
    reads.push(
      options.engine
        .inspect(request(options, brokerId, count).key, scope)
        .then((inspection) => inspection.state === KeyState.Completed),
    );
  }
  try {
    return (await Promise.all(reads)).filter(Boolean).length;
  } catch {
    return 0;
  }
}
