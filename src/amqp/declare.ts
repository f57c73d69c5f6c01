/**
 * Declaring the retry and dead-letter queues, and the retry queue's two types: the classic queue (the
 * default, as declared by every earlier version) and the quorum queue with at-least-once dead-lettering.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import type { AmqpConfirmChannel } from './amqp-types.js';

/** The types of retry queue the adapter declares. */
export type AmqpRetryQueueType = 'classic' | 'quorum';

const RETRY_QUEUE_TYPES: ReadonlySet<string> = new Set(['classic', 'quorum']);

/** Validate the `retryQueueType` option. @throws InvalidOptionsError when it is not a known type. */
export function retryQueueType(value: unknown): AmqpRetryQueueType {
  if (value === undefined || value === null) return 'classic';
  if (typeof value === 'string' && RETRY_QUEUE_TYPES.has(value)) return value as AmqpRetryQueueType;
  throw new InvalidOptionsError(
    `retryQueueType: must be 'classic' or 'quorum', got ${JSON.stringify(value) ?? String(value)}`,
  );
}

/**
 * The arguments of the retry queue: a copy's TTL ends, and the queue dead-letters it back to `queue`
 * through the default exchange. A classic queue does that at most once: a `queue` that refuses it (full
 * with `reject-publish`, deleted, a quorum queue without a leader) and the copy is dropped. A quorum queue
 * with `at-least-once` keeps it until `queue` confirms it; RabbitMQ (3.10+) requires the source to be a
 * quorum queue and its overflow to be `reject-publish` (with `drop-head` it falls back to at most once).
 */
export function retryQueueArguments(
  queue: string,
  type: AmqpRetryQueueType,
): Record<string, unknown> {
  const deadLettering = { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': queue };
  if (type === 'classic') return deadLettering;
  return {
    ...deadLettering,
    'x-queue-type': 'quorum',
    'x-dead-letter-strategy': 'at-least-once',
    'x-overflow': 'reject-publish',
  };
}

function isPreconditionFailed(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === 406;
}

/**
 * Declare the retry queue (of `type`) and the dead-letter queue, both durable.
 * @throws InvalidOptionsError when one exists with other arguments (RabbitMQ's `PRECONDITION_FAILED`,
 *   which also closes the channel), naming the options that fix it; its `cause` is RabbitMQ's error.
 */
export async function declareQueues(
  channel: AmqpConfirmChannel,
  names: { queue: string; retryQueue: string; deadLetterQueue: string },
  type: AmqpRetryQueueType,
): Promise<void> {
  const { queue, retryQueue, deadLetterQueue } = names;
  try {
    await channel.assertQueue(retryQueue, {
      durable: true,
      arguments: retryQueueArguments(queue, type),
    });
  } catch (error) {
    if (!isPreconditionFailed(error)) throw error;
    // A bare channel close said nothing of why: the usual cause is a retry queue declared by an earlier
    // version (classic) met by `retryQueueType: 'quorum'`, or one declared by hand.
    throw new InvalidOptionsError(
      `retryQueue: the queue "${retryQueue}" exists with other arguments than retryQueueType ` +
        `'${type}' declares (RabbitMQ: ${errorText(error)}); the channel is closed. Use another ` +
        "retryQueue name, delete the old queue once it is empty, set retryQueueType to the queue's " +
        'type, or declare the queues yourself and pass declare: false',
      { cause: error },
    );
  }
  try {
    await channel.assertQueue(deadLetterQueue, { durable: true });
  } catch (error) {
    if (!isPreconditionFailed(error)) throw error;
    throw new InvalidOptionsError(
      `deadLetterQueue: the queue "${deadLetterQueue}" exists with arguments the adapter does not ` +
        `declare (RabbitMQ: ${errorText(error)}); the channel is closed. Use another deadLetterQueue ` +
        'name, or declare the queues yourself and pass declare: false',
      { cause: error },
    );
  }
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
