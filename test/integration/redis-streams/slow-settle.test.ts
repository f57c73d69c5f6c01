/**
 * A settle slower than `minIdle`, against a real Redis 7, with the scripts and without them (an ACL user
 * without `@scripting`). Consumer A's handler has settled (its completion written, or its claim released
 * after a failure), and A is still carrying the decision out when consumer B's claim round looks at the
 * entry.
 *
 * - A dead letter whose record in the store takes longer than `minIdle`: the entry's idle time was reset
 *   only while the handler and its completion ran, so B reclaimed it, found no letter recorded yet and ran
 *   the handler a second time, past `maxDeliveries`; without the scripts, B then wrote a second letter.
 *   Now the idle resets go on until the settle ended: B never gets the entry.
 * - An ack held on A's link (a stalled connection: A's idle resets wait behind it too): B reclaims the
 *   entry and the store answers it as a duplicate of the completed key, acked, without running the handler
 *   again. Two reports remain, A's `onExecuted` and B's `onDuplicate` (see the docs).
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, type Idempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type RedisStreamsClient,
  type RedisStreamsConsumerOptions,
} from '../../../src/redis-streams/index.js';
import { type ScriptsMode, streamsFixture } from '../../helpers/streams-fixture.js';
import { otherProcessConsumer } from '../../helpers/streams-other-process.js';
import { waitUntil } from '../../helpers/wait-until.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('Redis Streams consumer: a settle slower than minIdle', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups, pendingCount: pending } = fixture;

  /** The dead letters' entry ids. */
  const letters = (stream: string) => fixture.letterField(stream, 'x-idempotency-entry-id');

  /** Consumer `consumer`'s options on `stream`, recording its hooks' reports into `events`. */
  const options = (
    stream: string,
    name: string,
    consumer: string,
    idempotency: Idempotency,
    events: string[],
  ): RedisStreamsConsumerOptions => ({
    stream,
    group: 'workers',
    name,
    consumer,
    idempotency,
    maxDeliveries: 1,
    minIdle: '300ms',
    claimInterval: '50ms',
    pollInterval: '10ms',
    hooks: {
      onExecuted: () => void events.push(`${consumer}:executed`),
      onDuplicate: () => void events.push(`${consumer}:duplicate`),
      onDeadLetter: () => void events.push(`${consumer}:dead-letter`),
      onRetry: () => void events.push(`${consumer}:retry`),
    },
  });

  it.each<[ScriptsMode]>([['without scripts'], ['with scripts']])(
    '%s: a dead letter recorded slowly is not reclaimed, nor its handler run again',
    async (mode) => {
      // Arrange: one store, whose dead-letter records take 1.2 s (four times minIdle); consumer A.
      const name = `slow-letter-${mode.replaceAll(' ', '-')}-${run}`;
      const stream = `ik-test:streams-slow-settle:${name}`;
      streams.push(stream, `${stream}:dlq`);
      const engine = createIdempotency({ store: memoryStore() });
      const slow = new Proxy(engine, {
        get(target, property) {
          const value = Reflect.get(target, property, target);
          if (property !== 'run' || typeof value !== 'function') {
            return typeof value === 'function' ? value.bind(target) : value;
          }
          return async (...args: Parameters<Idempotency['run']>) => {
            if (args[0].scope?.startsWith('dead-letter:')) await sleep(1_200);
            return value.apply(target, args);
          };
        },
      });
      const calls: string[] = [];
      const events: string[] = [];
      const handler = (_entry: unknown, context: { key: string }) => {
        calls.push(context.key);
        throw new Error('card declined');
      };
      const a = await idempotentConsumer(
        await fixture.clientFor(mode, `ik-test-noeval-${name}-a`),
        handler,
        options(stream, name, 'a', slow, events),
      );
      cleanups.push(() => a.close());
      const id = String(await fixture.add(stream, 'pay-slow-letter'));
      await waitUntil('A to run the handler', () => calls.length > 0);
      // B starts once A has read the entry: it only gets it by reclaiming it. Of another process: a
      // consumer of A's own leaves the entry A is handling to it, idle resets or not.
      const otherProcess = await otherProcessConsumer();
      const b = await otherProcess(
        await fixture.clientFor(mode, `ik-test-noeval-${name}-b`),
        handler,
        options(stream, name, 'b', slow, events),
      );
      cleanups.push(() => b.close());

      // Act: A's letter lands after its slow record; anything B would do has time to.
      await waitUntil('the letter', async () => (await letters(stream)).length > 0, 10_000);
      await waitUntil('the entry acked', async () => (await pending(stream)) === 0, 10_000);
      await sleep(1_500);

      // Assert: one run, one letter, one report (before: B ran the handler again, and without the
      // scripts wrote a second letter).
      expect(await a.close()).toBe(true);
      expect(await b.close()).toBe(true);
      expect(calls).toEqual(['pay-slow-letter']);
      expect(await letters(stream)).toEqual([id]);
      expect(events).toEqual(['a:dead-letter']);
    },
  );

  it.each<[ScriptsMode]>([['without scripts'], ['with scripts']])(
    '%s: an ack held on its link is answered as a duplicate elsewhere, never run again',
    async (mode) => {
      // Arrange: consumer A, whose link stalls from its first XACK on until released.
      const name = `slow-ack-${mode.replaceAll(' ', '-')}-${run}`;
      const stream = `ik-test:streams-slow-settle:${name}`;
      streams.push(stream, `${stream}:dlq`);
      const engine = createIdempotency({ store: memoryStore() });
      const real = await fixture.clientFor(mode, `ik-test-noeval-${name}-a`);
      let stalled: Promise<void> | undefined;
      let release = () => {};
      const client: RedisStreamsClient = {
        sendCommand: async (args: Array<string | Buffer>, options?: object) => {
          if (String(args[0]) === 'XACK' && stalled === undefined) {
            stalled = new Promise((resolve) => {
              release = resolve;
            });
          }
          if (stalled !== undefined) await stalled;
          return real.sendCommand(args, options);
        },
      };
      const calls: string[] = [];
      const events: string[] = [];
      const handler = (_entry: unknown, context: { key: string }) => void calls.push(context.key);
      const a = await idempotentConsumer(
        client,
        handler,
        options(stream, name, 'a', engine, events),
      );
      cleanups.push(() => a.close());
      await fixture.add(stream, 'pay-slow-ack');
      await waitUntil('A to run the handler', () => calls.length > 0);
      // Of another process: a consumer of A's own leaves the entry A is handling to it.
      const otherProcess = await otherProcessConsumer();
      const b = await otherProcess(
        await fixture.clientFor(mode, `ik-test-noeval-${name}-b`),
        handler,
        options(stream, name, 'b', engine, events),
      );
      cleanups.push(() => b.close());

      // Act: B reclaims the entry while A's ack is held; then A's link recovers.
      await waitUntil('B’s duplicate', () => events.includes('b:duplicate'), 10_000);
      release();
      await waitUntil('A’s report', () => events.includes('a:executed'), 10_000);
      await sleep(500);

      // Assert: the handler ran once; the entry settled, reported by both deliveries.
      expect(await a.close()).toBe(true);
      expect(await b.close()).toBe(true);
      expect(calls).toEqual(['pay-slow-ack']);
      expect(await pending(stream)).toBe(0);
      expect(await letters(stream)).toEqual([]);
      expect(events.sort()).toEqual(['a:executed', 'b:duplicate']);
    },
  );
});
