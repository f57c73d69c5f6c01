/**
 * A graceful shutdown against a real Redis: an entry that the blocking read in progress brings after
 * `close()` began is not started (a deploy's old process must not begin a payment it may not finish). It is
 * handed back: left pending, idle for `minIdle`, so another consumer's next claim round takes it at once,
 * and that hand-back does not count against `maxDeliveries`. (Before, the closing consumer ran it.)
 */
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { loadScript } from '../../../src/redis/script-runner.js';
import {
  idempotentConsumer,
  type RedisStreamsConsumerErrorEvent,
  type RedisStreamsConsumerOptions,
} from '../../../src/redis-streams/index.js';
import { setIdle } from '../../../src/redis-streams/scripts.gen.js';
import { env } from '../../helpers/env.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { waitUntil } from '../../helpers/wait-until.js';

// The set-idle script as the consumer sends it: EVALSHA with its SHA1 (EVAL with its source after NOSCRIPT).
const SET_IDLE_SHA = loadScript(setIdle).sha;

describe('Redis Streams consumer: entries read while closing', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups, add } = fixture;

  /** Whether the client named `name` is blocked in an `XREADGROUP`. */
  const blockedInRead = async (name: string) =>
    String(await fixture.admin.sendCommand(['CLIENT', 'LIST']))
      .split('\n')
      .some((line) => line.includes(` name=${name} `) && line.includes('cmd=xreadgroup'));

  it('hands back, never starting, an entry its read brings after close() began; another consumer runs it at once', async () => {
    // Arrange: consumer A blocked in its read; one store shared with consumer B, which takes over.
    const stream = `ik-test:streams-close-hand-back:${run}`;
    streams.push(stream, `${stream}:dlq`);
    const engine = createIdempotency({ store: memoryStore() });
    const blockingName = `ik-close-hand-back-${run}`;
    const blocking = createClient({ url: env.redisUrl, name: blockingName });
    await blocking.connect();
    cleanups.push(() => blocking.destroy());
    const common: Omit<RedisStreamsConsumerOptions, 'consumer'> = {
      stream,
      group: 'workers',
      name: `close-hand-back-${run}`,
      idempotency: engine,
      minIdle: '30s',
      maxDeliveries: 2,
      backoff: { initial: '10ms', max: '10ms', jitter: false },
    };
    let ranOnA = 0;
    const a = await idempotentConsumer(
      fixture.admin,
      () => {
        ranOnA++;
      },
      { ...common, consumer: 'a', blockingClient: blocking, block: '5s', claimInterval: '1h' },
    );
    await waitUntil('A to block in its read', () => blockedInRead(blockingName));

    // Act: the entry arrives while A closes.
    const closing = a.close();
    await add(stream, 'pay-while-closing');
    const closed = await closing;

    // Assert: not run on A; pending, idle for minIdle, ready for any consumer's next claim round.
    expect(closed).toBe(true);
    expect(ranOnA).toBe(0);
    const [pendingEntry] = (await fixture.admin.sendCommand([
      'XPENDING',
      stream,
      'workers',
      '-',
      '+',
      '10',
    ])) as Array<[string, string, number, number]>;
    expect(pendingEntry?.[1]).toBe('a');
    expect(Number(pendingEntry?.[2])).toBeGreaterThanOrEqual(30_000);

    // B takes it at its first claim round, not after minIdle. Its first run fails: with maxDeliveries 2
    // and this its second delivery, the hand-back (not a run) is not counted, so it is retried, not
    // dead-lettered.
    const runsOnB: number[] = [];
    const deadLetters: string[] = [];
    let executed = 0;
    const b = await idempotentConsumer(
      fixture.admin,
      (_entry, context) => {
        runsOnB.push(context.deliveryCount);
        if (runsOnB.length === 1) throw new Error('card processor busy');
      },
      {
        ...common,
        consumer: 'b',
        pollInterval: '10ms',
        claimInterval: '50ms',
        hooks: {
          onExecuted: () => void executed++,
          onDeadLetter: (event) => void deadLetters.push(event.reason),
        },
      },
    );
    cleanups.push(() => b.close());
    await waitUntil('B to execute the entry', () => executed === 1, 5_000);
    expect(runsOnB).toEqual([2, 3]);
    expect(deadLetters).toEqual([]);
  });

  it('reports and records an entry it hands back that was deleted since its read, instead of dropping it', async () => {
    // Arrange: consumer A blocked in its read; its hand-back command is preceded by an XDEL of the entry (a
    // MAXLEN trim landing between the read and the hand-back). Before, the hand-back's XCLAIM dropped the
    // deleted id from the pending list without a word: the message was lost in silence.
    const stream = `ik-test:streams-close-hand-back-deleted:${run}`;
    streams.push(stream, `${stream}:dlq`);
    const blockingName = `ik-close-hand-back-deleted-${run}`;
    const blocking = createClient({ url: env.redisUrl, name: blockingName });
    await blocking.connect();
    cleanups.push(() => blocking.destroy());
    let handedBack: string | undefined;
    const client = {
      sendCommand: async (args: Array<string | Buffer>, options?: object) => {
        const text = args.map(String);
        const isHandBack =
          (text[0] === 'XCLAIM' && text.includes('30000')) ||
          (((text[0] === 'EVAL' && text[1]?.includes('set-idle-1.lua')) ||
            (text[0] === 'EVALSHA' && text[1] === SET_IDLE_SHA)) &&
            text[6] === '30000');
        if (isHandBack && handedBack === undefined) {
          handedBack = text[0] === 'XCLAIM' ? text[5] : text[7];
          await fixture.admin.sendCommand(['XDEL', stream, String(handedBack)]);
        }
        return fixture.admin.sendCommand(args, options as never);
      },
    };
    const errors: RedisStreamsConsumerErrorEvent[] = [];
    let ran = 0;
    const a = await idempotentConsumer(
      client,
      () => {
        ran++;
      },
      {
        stream,
        group: 'workers',
        name: `close-hand-back-deleted-${run}`,
        consumer: 'a',
        idempotency: createIdempotency({ store: memoryStore() }),
        minIdle: '30s',
        blockingClient: blocking,
        block: '5s',
        claimInterval: '1h',
        hooks: { onConsumerError: (event) => void errors.push(event) },
      },
    );
    await waitUntil('A to block in its read', () => blockedInRead(blockingName));

    // Act
    const closing = a.close();
    const id = await add(stream, 'pay-trimmed-while-closing');
    const closed = await closing;

    // Assert: reported, and recorded with its fields; nothing left pending.
    expect(closed).toBe(true);
    expect(ran).toBe(0);
    expect(handedBack).toBe(id);
    expect(errors.map((event) => [event.operation, event.entryId])).toEqual([['deleted', id]]);
    const letters = (await fixture.admin.sendCommand([
      'XRANGE',
      `${stream}:dlq`,
      '-',
      '+',
    ])) as Array<[string, string[]]>;
    expect(letters).toHaveLength(1);
    const fields = letters[0]?.[1] ?? [];
    expect(fields).toContain('pay-trimmed-while-closing');
    expect(fields[fields.indexOf('x-idempotency-dead-letter-reason') + 1]).toBe('deleted');
    const [count] = (await fixture.admin.sendCommand(['XPENDING', stream, 'workers'])) as [number];
    expect(Number(count)).toBe(0);
  });
});
