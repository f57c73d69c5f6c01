/**
 * The queues and prefetch of a RabbitMQ consumer, validated before anything is declared or sent, so that
 * a wrong option fails with an `InvalidOptionsError` and leaves the caller's channel usable.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import { shownValue } from '../core/option-checks.js';

/** AMQP's `basic.qos` prefetch-count is a 16-bit field; 0 would mean "unlimited". */
export const MAX_PREFETCH = 65_535;

/** The queue options as given. */
export interface AmqpQueueOptions {
  queue: string;
  retryQueue?: string;
  deadLetterQueue?: string;
  prefetch?: number;
}

/** The queue names and prefetch, with defaults applied. */
export interface AmqpQueues {
  queue: string;
  retryQueue: string;
  deadLetterQueue: string;
  prefetch: number;
}

function queueName(value: unknown, name: string): string {
  if (typeof value !== 'string' || value === '') {
    throw new InvalidOptionsError(`${name}: must be a non-empty queue name`);
  }
  return value;
}

/**
 * Validate the queue options and apply defaults.
 * @throws InvalidOptionsError when a name is empty, two of the three queues are the same (a copy would
 *   come straight back to the consumer, or a dead letter would expire into the queue), or `prefetch` is
 *   not an integer in 1–65535.
 */
export function amqpQueues(options: AmqpQueueOptions, concurrency: number): AmqpQueues {
  if (typeof options.queue !== 'string' || options.queue === '') {
    throw new InvalidOptionsError('queue: the queue to consume is required');
  }
  const queue = options.queue;
  const retryQueue = queueName(options.retryQueue ?? `${queue}.retry`, 'retryQueue');
  const deadLetterQueue = queueName(options.deadLetterQueue ?? `${queue}.dlq`, 'deadLetterQueue');
  if (retryQueue === queue) {
    throw new InvalidOptionsError(`retryQueue: must not be the consumed queue "${queue}"`);
  }
  if (deadLetterQueue === queue) {
    throw new InvalidOptionsError(`deadLetterQueue: must not be the consumed queue "${queue}"`);
  }
  if (deadLetterQueue === retryQueue) {
    throw new InvalidOptionsError(
      `deadLetterQueue: must not be the retry queue "${retryQueue}" (dead letters would expire back)`,
    );
  }
  // `null` is "not given", as for every option; a string (`'100'` from the environment) is refused below.
  const prefetch = options.prefetch ?? concurrency;
  if (!Number.isSafeInteger(prefetch) || prefetch < 1 || prefetch > MAX_PREFETCH) {
    throw new InvalidOptionsError(
      `prefetch: must be an integer from 1 to ${MAX_PREFETCH}, got ${shownValue(prefetch)}`,
    );
  }
  return { queue, retryQueue, deadLetterQueue, prefetch };
}
