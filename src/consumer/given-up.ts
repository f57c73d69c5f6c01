/**
 * Dead letters recorded in the idempotency store (every one, before it is written), for brokers that cannot carry
 * one on the redelivered copy (NATS JetStream, Redis Streams: the redelivery is the same stored message,
 * unchanged; RabbitMQ, for a letter written into a link that then dies: the broker requeues the message
 * unchanged. RabbitMQ carries a letter whose write failed in a header of the retry copy, see
 * `amqp/pending-letter.ts`, and records only the letters of its own retry copies, the only deliveries
 * with an identity across redeliveries).
 *
 * Why: once the consumer gives up on a message (its handler failed on the last allowed delivery, an error
 * marked permanent, no usable key), a dead-letter destination that fails (a DLQ subject no stream captures,
 * a DLQ key of the wrong type) keeps the message for a later try. Without a record, that redelivery ran
 * the handler again, past `maxDeliveries`, on every try for as long as the destination stayed broken. The
 * record is keyed by the broker's identity of the message (`Delivery.brokerId`), not by its idempotency
 * key: another message with the same key, a replay from the dead-letter queue say, is a new message with
 * its own deliveries, and must not be dead-lettered by this one's record.
 *
 * Every dead letter of such an adapter is recorded before it is written, and the record stays until
 * `retention`, also once the letter is written: the settle that follows the write is not confirmed on every
 * broker (a JetStream `term()` gets no reply; a process can die between the Redis `XADD` and its `XACK`),
 * and the redelivery it then leads to must write the letter again, never run the handler. Dropping the
 * record after the write would reopen exactly that.
 * @module
 */
import type { RunRequest } from '../core/engine.js';
import { KeyState } from '../core/inspection.js';
import { ReservedScopePrefix } from '../core/reserved-scopes.js';
import { type MaybeUnreported, UNREPORTED_RUN } from '../core/unreported-runs.js';
import type { ResolvedConsumerOptions } from './options.js';
import type { DeadLetter, Delivery } from './settle.js';

/**
 * The scope of consumer `name`'s records of dead letters not yet written. Not under `consumer:`, so no
 * consumer's name can make its keys' scope collide with it; reserved, so no HTTP scope can either
 * (core/reserved-scopes.ts).
 */
export function deadLetterScope(name: string): string {
  return `${ReservedScopePrefix.DeadLetter}${name}`;
}

/** Thrown by the lookup's function, which must never complete: nothing is recorded by a lookup. */
const NOT_RECORDED = new Error('no dead letter recorded');

function request<M>(options: ResolvedConsumerOptions<M>, brokerId: string): RunRequest {
  const request: RunRequest & MaybeUnreported = {
    key: brokerId,
    scope: deadLetterScope(options.name),
    storeErrors: false,
    failOpen: false,
    // The consumer's own record, not a run of the application: not reported as one.
    [UNREPORTED_RUN]: true,
  };
  if (options.retentionMs !== undefined) request.retentionMs = options.retentionMs;
  return request;
}

/**
 * Record `letter` for the redeliveries of `delivery`, when its adapter gives a `brokerId`. Rejects when the
 * store cannot record it: the redelivery may then run the handler again, as it did before records existed.
 */
export async function recordDeadLetter<M>(
  options: ResolvedConsumerOptions<M>,
  delivery: Delivery<M>,
  letter: DeadLetter,
): Promise<void> {
  if (delivery.brokerId === undefined) return;
  // A record already there (an earlier try of the same message) is the same decision: nothing to do.
  await options.engine.run(request(options, delivery.brokerId), () => letter);
}

/**
 * The dead letter recorded for `delivery` by an earlier delivery of the same message, if any. Only
 * redeliveries look (a first delivery cannot have one), with one store read unless there is a record.
 * Never rejects: a store that cannot be read leaves the delivery to the usual path, which fails closed.
 */
export async function recordedDeadLetter<M>(
  options: ResolvedConsumerOptions<M>,
  delivery: Delivery<M>,
): Promise<DeadLetter | undefined> {
  const { brokerId } = delivery;
  if (brokerId === undefined || delivery.deliveryCount <= 1 || delivery.firstDelivery === true) {
    return undefined;
  }
  try {
    const scope = deadLetterScope(options.name);
    if ((await options.engine.inspect(brokerId, scope)).state !== KeyState.Completed) {
      return undefined;
    }
    const outcome = await options.engine.run<DeadLetter>(request(options, brokerId), () => {
      throw NOT_RECORDED;
    });
    return outcome.status === 'replayed' ? outcome.value : undefined;
  } catch {
    return undefined;
  }
}
