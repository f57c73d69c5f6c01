/**
 * Whether a dead letter is already in the dead-letter stream: how the two-command fallback (`XADD` then
 * `XACK`, where the dead-letter script cannot run) writes each letter at most once.
 *
 * Why: an `XACK` that fails after its `XADD` landed (a dropped connection, a timeout), an `XADD` whose reply
 * was lost, or a process that dies between the two leaves the entry pending with its letter written. Its
 * redelivery finds the letter recorded in the store (consumer/given-up.ts) and wrote it again: two letters
 * for one entry. The dead-letter stream itself is the only place that knows whether the first `XADD`
 * landed (a store record made after it would miss exactly the lost reply and the crash), so the redelivery
 * looks there before writing.
 *
 * A letter is told by what every write of it carries unchanged: the entry id, the consumer's name and
 * `failedAt` (a redelivery writes the letter recorded by the delivery that decided it, not a new one).
 * Letters are only looked for among the entries added since `failedAt`, less {@link CLOCK_ALLOWANCE_MS}:
 * `failedAt` is the deciding process's clock, the letter's id Redis's, and the letter was added after the
 * decision. So the look is bounded by the letters written since, and a deciding host whose clock runs more
 * than that allowance ahead of Redis's could miss its letter (and write a second one, as before).
 * @module
 */
import type { DeadLetter } from '../consumer/index.js';
import { command, parseEntries, type RedisStreamsClient } from './redis-client.js';

/**
 * How far a consumer's clock may run ahead of Redis's for its letter to be found: the letter's id (Redis's
 * clock) is looked for from `failedAt` (the consumer's) less this.
 */
export const CLOCK_ALLOWANCE_MS = 60_000;

/** Entries read per `XREVRANGE`: letters are few, and one page is nearly always all of them. */
const PAGE = 100;

/**
 * Whether the dead-letter stream `deadLetterStream` holds `letter` for entry `entryId`, looking back from
 * its newest entry to `failedAt` less {@link CLOCK_ALLOWANCE_MS}. Rejects when Redis does (the key of
 * another type: the letter's failure, as its `XADD`'s would be).
 */
export async function letterWritten(
  client: RedisStreamsClient,
  deadLetterStream: string,
  entryId: string,
  letter: DeadLetter,
): Promise<boolean> {
  const failedAt = Date.parse(letter.failedAt);
  // An unreadable date bounds nothing: look through the whole stream rather than miss the letter.
  const oldest = Number.isFinite(failedAt) ? `${Math.max(failedAt - CLOCK_ALLOWANCE_MS, 0)}` : '-';
  let newest = '+';
  for (;;) {
    const { entries } = parseEntries(
      deadLetterStream,
      await command(client, ['XREVRANGE', deadLetterStream, newest, oldest, 'COUNT', String(PAGE)]),
    );
    for (const { fields } of entries) {
      // The letter's own fields come after the entry's: a field of the same name in the entry (a letter
      // replayed from the dead-letter stream) is overwritten by the letter's when parsed.
      if (
        fields['x-idempotency-entry-id'] === entryId &&
        fields['x-idempotency-consumer'] === letter.consumer &&
        fields['x-idempotency-failed-at'] === letter.failedAt
      ) {
        return true;
      }
    }
    const last = entries.at(-1);
    if (entries.length < PAGE || last === undefined) return false;
    // Exclusive: the next page starts below the last entry read (Redis 6.2+, as XAUTOCLAIM).
    newest = `(${last.id}`;
  }
}
