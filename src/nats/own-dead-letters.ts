/**
 * A dead-letter subject the consumer takes back itself. The dead letter is a copy of the message with its
 * key in `x-idempotency-key`, so a consumer whose stream and filter capture `deadLetterSubject` got each
 * letter as a new message under the same key, whose claim the failed handler had released: the handler ran
 * again, failed again and wrote one more letter, without end (some 800 runs a second against a local
 * server). The RabbitMQ and Redis Streams consumers refuse the same setting (a dead-letter queue or stream
 * that is the consumed one).
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import type { NatsConsumerConfig, NatsPullConsumer } from './nats-types.js';

/** Whether NATS subject `subject` matches `filter` (`*` one token, `>` one or more to the end). */
export function subjectMatches(filter: string, subject: string): boolean {
  const want = filter.split('.');
  const have = subject.split('.');
  for (let i = 0; i < want.length; i++) {
    if (want[i] === '>') return have.length > i;
    if (i >= have.length || (want[i] !== '*' && want[i] !== have[i])) return false;
  }
  return want.length === have.length;
}

/** The consumer's filters; none means every subject of its stream. */
function filtersOf(config: NatsConsumerConfig): string[] {
  const filters = [...(config.filter_subjects ?? [])];
  if (config.filter_subject !== undefined && config.filter_subject !== '') {
    filters.push(config.filter_subject);
  }
  return filters;
}

/**
 * Refuse `deadLetterSubject` when the JetStream consumer takes it back: its stream captures the subject
 * (asked of the server, `$JS.API.STREAM.NAMES`), and no filter of the consumer leaves it out. A consumer
 * object that cannot ask (no `api.findStream`), or a subject no stream captures (the publish of each letter
 * then fails, and is reported), is let through.
 * @throws InvalidOptionsError naming the subject, the stream and the filters.
 */
export async function refuseOwnDeadLetters(
  consumer: NatsPullConsumer,
  stream: string | undefined,
  config: NatsConsumerConfig,
  deadLetterSubject: string,
): Promise<void> {
  const findStream = consumer.api?.findStream;
  if (stream === undefined || findStream === undefined) return;
  const capturing = await findStream.call(consumer.api, deadLetterSubject).catch(() => undefined);
  if (capturing !== stream) return;
  const filters = filtersOf(config);
  if (filters.length > 0 && !filters.some((filter) => subjectMatches(filter, deadLetterSubject))) {
    return;
  }
  throw new InvalidOptionsError(
    `deadLetterSubject: '${deadLetterSubject}' is captured by stream '${stream}' and taken by this ` +
      `JetStream consumer (${filters.length === 0 ? 'no filter' : `filter ${filters.join(', ')}`}): each ` +
      'dead letter would come back to it under the same key, and run the handler again, without end. ' +
      "Use a subject of another stream, or one the consumer's filter leaves out",
  );
}
