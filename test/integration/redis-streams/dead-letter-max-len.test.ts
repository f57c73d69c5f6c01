/**
 * The dead-letter stream's bound (`deadLetterMaxLen`), against a real Redis, through the dead-letter script
 * and through its two commands where Redis refuses scripts: each letter is added with `MAXLEN ~ n`, so the
 * stream keeps about the newest `n` (whole nodes of 100 entries are trimmed). Before, it had no bound at all:
 * dead letters grew for as long as messages failed. Without the option, every letter is kept.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/redis-streams/index.js';
import { type ScriptsMode, streamsFixture } from '../../helpers/streams-fixture.js';
import { waitUntil } from '../../helpers/wait-until.js';

/** Letters written: past two nodes of the stream (`stream-node-max-entries`, 100 by default) and the bound. */
const LETTERS = 450;
const MAX_LEN = 100;

describe('Redis Streams consumer: a bounded dead-letter stream', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups } = fixture;

  /** Dead-letter `LETTERS` entries of a new stream through a consumer with `maxLen`; resolves to the stream. */
  async function deadLetterAll(mode: ScriptsMode, label: string, maxLen?: number) {
    const stream = `ik-test:streams-dlq-max-len-${label}:${run}`;
    streams.push(stream, `${stream}:dlq`);
    const client = await fixture.clientFor(mode, `ik-dlq-max-len-${label}-${run}`);
    let letters = 0;
    const consumer = await idempotentConsumer(
      client,
      () => {
        throw new Error('card declined');
      },
      {
        stream,
        group: 'workers',
        name: `dlq-max-len-${label}-${run}`,
        idempotency: createIdempotency({ store: memoryStore() }),
        pollInterval: '10ms',
        concurrency: 50,
        maxDeliveries: 1,
        ...(maxLen === undefined ? {} : { deadLetterMaxLen: maxLen }),
        hooks: { onDeadLetter: () => void letters++ },
      },
    );
    cleanups.push(() => consumer.close());
    const ids: string[] = [];
    for (let index = 0; index < LETTERS; index++) {
      ids.push(String(await fixture.add(stream, `dlq-max-len-${label}-${index}-${run}`)));
    }
    await waitUntil('every entry to be dead-lettered', () => letters === LETTERS, 30_000);
    expect(await consumer.close()).toBe(true);
    expect(await fixture.pendingCount(stream)).toBe(0);
    return { stream, ids };
  }

  it.each<ScriptsMode>(['with scripts', 'without scripts'])(
    'keeps about the newest deadLetterMaxLen letters (%s)',
    async (mode) => {
      // Arrange, Act: 450 entries dead-lettered with deadLetterMaxLen 100.
      const { stream, ids } = await deadLetterAll(
        mode,
        mode === 'with scripts' ? 'scripted' : 'plain',
        MAX_LEN,
      );

      // Assert: trimmed to the bound, give or take a node of 100; the newest letters kept (before: 450).
      const length = Number(await fixture.admin.sendCommand(['XLEN', `${stream}:dlq`]));
      expect(length).toBeGreaterThanOrEqual(MAX_LEN);
      expect(length).toBeLessThanOrEqual(MAX_LEN + 100);
      const kept = await fixture.letterField(stream, 'x-idempotency-entry-id');
      expect(kept.at(-1)).toBe(ids.at(-1));
      expect(new Set(kept).size).toBe(kept.length);
    },
  );

  it('keeps every letter without deadLetterMaxLen', async () => {
    // Arrange, Act
    const { stream } = await deadLetterAll('with scripts', 'unbounded');

    // Assert
    expect(Number(await fixture.admin.sendCommand(['XLEN', `${stream}:dlq`]))).toBe(LETTERS);
  });
});
