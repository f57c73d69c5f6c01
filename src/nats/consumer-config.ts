/**
 * The JetStream consumer's own configuration, read once when the idempotent consumer starts, against what
 * this adapter needs of it. A consumer configured otherwise lost messages in silence or took none:
 *
 * - `ack_policy` other than `explicit` (`all`, or `none`, which an ordered consumer has): a `nak()` for a
 *   retry did nothing (`none`), or an ack of one message acked the failing ones before it (`all`), so a
 *   failed message was never redelivered;
 * - `max_deliver` below `maxDeliveries`: the server stopped redelivering a failing message before this
 *   adapter could dead-letter it;
 * - a `workingInterval` not shorter than `ack_wait`, or than a shorter `backoff` entry (the window the
 *   server gives that delivery): every `working()` came too late, and the server redelivered a message
 *   while its handler ran, each copy counting a delivery toward `maxDeliveries`;
 * - `max_batch` or `max_expires` below what a pull asks for: the server refused every pull.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import type { NatsConsumerConfig } from './nats-types.js';
import { shortestAckWindowMs } from './server-backoff.js';

/** How long one pull waits on the server for messages (the NATS client's own default). */
export const PULL_EXPIRES_MS = 30_000;
/** The shortest pull the NATS client makes (it refuses an `expires` below it). */
const MIN_PULL_EXPIRES_MS = 1000;

/** What a pull may ask of the server. */
export interface PullLimits {
  /** Most messages one pull may ask for: the consumer's `max_batch`, unbounded without one. */
  maxBatch: number;
  /** How long one pull waits: 30 s, or less when the consumer's `max_expires` says so. */
  expiresMs: number;
}

/**
 * Refuse a JetStream consumer this adapter cannot settle messages on without losing some (see the
 * module), and give the limits its pulls must keep to.
 * @param workingMs - The `workingInterval` given, if any (one derived is a third of the shortest window).
 * @throws InvalidOptionsError naming the setting to change.
 */
export function checkConsumerConfig(
  config: NatsConsumerConfig,
  maxDeliveries: number,
  workingMs: number | undefined,
): PullLimits {
  const { ack_policy, max_deliver, ack_wait, max_batch, max_expires } = config;
  if (ack_policy !== undefined && ack_policy !== 'explicit') {
    throw new InvalidOptionsError(
      `the JetStream consumer has ack_policy '${ack_policy}': it needs 'explicit' (with 'none', which ` +
        "ordered consumers have, a retry's nak() does nothing; with 'all', an ack settles the failing " +
        'messages before it: either way a failed message is never redelivered). Use a durable or ' +
        "named pull consumer with ack_policy 'explicit'",
    );
  }
  if (max_deliver !== undefined && max_deliver > 0 && max_deliver < maxDeliveries) {
    throw new InvalidOptionsError(
      `the JetStream consumer has max_deliver ${max_deliver}, below maxDeliveries (${maxDeliveries}): ` +
        'the server would stop redelivering a failing message before it is dead-lettered, and drop it ' +
        'unreported. Set max_deliver to -1 (recommended), or lower maxDeliveries',
    );
  }
  // With a backoff, a delivery's window is its entry, which may be shorter than ack_wait (server-backoff.ts).
  const windowMs = shortestAckWindowMs(config);
  if (workingMs !== undefined && windowMs !== undefined && workingMs >= windowMs) {
    const setting = windowMs === (ack_wait ?? 0) / 1e6 ? 'ack_wait' : 'shortest backoff entry';
    throw new InvalidOptionsError(
      `workingInterval: ${workingMs} ms is not shorter than the JetStream consumer's ${setting} ` +
        `(${windowMs} ms): the server would redeliver a message while its handler runs. Leave it ` +
        `out (a third of the ${setting}), or make it shorter than the ${setting}`,
    );
  }
  const maxExpiresMs = max_expires !== undefined && max_expires > 0 ? max_expires / 1e6 : undefined;
  if (maxExpiresMs !== undefined && maxExpiresMs < MIN_PULL_EXPIRES_MS) {
    throw new InvalidOptionsError(
      `the JetStream consumer has max_expires ${maxExpiresMs} ms: the NATS client pulls for at least ` +
        `${MIN_PULL_EXPIRES_MS} ms, so the server would refuse every pull. Set max_expires to 1s or more`,
    );
  }
  return {
    maxBatch: max_batch !== undefined && max_batch > 0 ? max_batch : Number.POSITIVE_INFINITY,
    // A pull waiting longer than max_expires is refused by the server.
    expiresMs: Math.min(PULL_EXPIRES_MS, Math.floor(maxExpiresMs ?? PULL_EXPIRES_MS)),
  };
}

/**
 * The server redelivers a message no more once it was delivered `max_deliver` times: a redelivery asked
 * for on that last delivery (a retry while the key is in progress elsewhere, a store outage, a dead letter
 * that could not be written) is never made, and the message is dropped.
 */
export class MaxDeliverReachedError extends Error {
  override readonly name = 'MaxDeliverReachedError';

  constructor(maxDeliver: number) {
    super(
      `the JetStream consumer's max_deliver (${maxDeliver}) is reached: the server will not redeliver ` +
        'this message, which is dropped unprocessed (set max_deliver to -1)',
    );
  }
}

/**
 * Whether a delivery numbered `deliveryCount` is the last one `config.max_deliver` allows: a redelivery
 * asked for on it is never made (the retry reports a {@link MaxDeliverReachedError} then, rather than lose
 * the message in silence), and a hand-back before it buys no further delivery.
 */
export function lastServerDelivery(config: NatsConsumerConfig): (deliveryCount: number) => boolean {
  const { max_deliver } = config;
  if (max_deliver === undefined || max_deliver <= 0) return () => false;
  return (deliveryCount) => deliveryCount >= max_deliver;
}
