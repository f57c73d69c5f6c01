/**
 * `waitForReplicas` without a server: the option's checks, and the order of the commands the store sends
 * (the `WAIT` right behind its script, and again behind an `EVAL` after `NOSCRIPT`). The behaviour against a
 * real replica is in test/integration/redis/replicas.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { isReplicationShortError, isStoreUnavailableError } from '../../../src/core/errors.js';
import { type RedisStoreOptions, redisStore } from '../../../src/redis/index.js';

type Args = ReadonlyArray<string | Buffer>;
const client = (send: (args: Args) => Promise<unknown>) => ({
  sendCommand: (args: Args) => send(args),
});
const quiet = { checkEvictionPolicy: false } as const;
const ok = client(async () => 1);

describe('redisStore waitForReplicas option', () => {
  it.each([
    [
      { count: 0, timeoutMs: 100 },
      /^redisStore: waitForReplicas\.count: must be a positive integer, got 0$/,
    ],
    [{ count: 1.5, timeoutMs: 100 }, /waitForReplicas\.count: .*got 1\.5$/],
    [{ count: '1', timeoutMs: 100 }, /waitForReplicas\.count: .*got "1"$/],
    [{ timeoutMs: 100 }, /^redisStore: waitForReplicas: count is required/],
    [{ count: 1 }, /^redisStore: waitForReplicas: timeoutMs is required/],
    [
      { count: 1, timeoutMs: 0 },
      /waitForReplicas\.timeoutMs: expected a positive whole number.*got 0$/,
    ],
    [{ count: 1, timeoutMs: '100' }, /waitForReplicas\.timeoutMs: .*got "100"$/],
    [{ count: 1, timeoutMs: 1.5 }, /waitForReplicas\.timeoutMs: .*got 1\.5$/],
    [{ count: 1, timeoutMs: 2 ** 31 }, /at most 2147483647 ms.*got 2147483648$/],
    [{ count: 1, timeoutMs: 2000 }, /must be below the store's timeoutMs \(2000 ms\).*got 2000$/],
    [
      { count: 1, timeoutMs: 100, replicas: 1 },
      /^redisStore: waitForReplicas: unknown field "replicas"; the fields are count, timeoutMs$/,
    ],
    [1, /^redisStore: waitForReplicas: expected an object \{ count, timeoutMs \}, got 1$/],
    [true, /expected an object .*got true$/],
    [[1, 100], /expected an object .*got \[1,100\]$/],
  ])('refuses %o when the store is created', (waitForReplicas, message) => {
    // Act / Assert
    expect(() =>
      redisStore({ client: ok, ...quiet, waitForReplicas } as unknown as RedisStoreOptions),
    ).toThrow(
      expect.objectContaining({ code: 'invalid_options', message: expect.stringMatching(message) }),
    );
  });

  it('refuses a cluster client, whose WAIT could not reach the node that ran the script', () => {
    // Arrange: the shape of a node-redis cluster client.
    const cluster = { sendCommand: async () => 1, nodeClient: () => ok, masters: [] };
    // Act / Assert
    expect(() =>
      redisStore({ client: cluster, ...quiet, waitForReplicas: { count: 1, timeoutMs: 100 } }),
    ).toThrow(/waitForReplicas: not supported with a cluster client/);
  });

  it('is off for null (not given): no WAIT is sent', async () => {
    // Arrange
    const sent: string[] = [];
    const store = redisStore({
      client: client(async (args) => {
        sent.push(String(args[0]));
        return 1;
      }),
      ...quiet,
      waitForReplicas: null as unknown as undefined,
    });
    // Act
    await store.complete('k', 1, Uint8Array.of(1), 1000);
    // Assert
    expect(sent).toEqual(['EVALSHA']);
  });

  it("sends WAIT <count> <ms> behind the script, and again behind the EVAL after NOSCRIPT ('1s')", async () => {
    // Arrange
    const sent: string[][] = [];
    let flushed = true;
    const store = redisStore({
      client: client(async (args) => {
        sent.push(args.map(String).slice(0, 3));
        if (args[0] === 'EVALSHA' && flushed) {
          flushed = false;
          throw new Error('NOSCRIPT No matching script. Please use EVAL.');
        }
        return args[0] === 'WAIT' ? 2 : 1;
      }),
      ...quiet,
      timeoutMs: '5s',
      waitForReplicas: { count: 2, timeoutMs: '1s' },
    });
    // Act
    const completed = await store.complete('k', 1, Uint8Array.of(1), 1000);
    const released = await store.release('k', 1);
    // Assert
    expect(completed).toBe(true);
    expect(released).toBe(true);
    // The stub answers NOSCRIPT at once, before the turn's WAIT is sent: the EVAL shares it.
    expect(sent.map((args) => (args[0] === 'WAIT' ? args.join(' ') : args[0]))).toEqual([
      'EVALSHA',
      'EVAL',
      'WAIT 2 1000',
      'EVALSHA',
      'WAIT 2 1000',
    ]);
  });

  it('shares one WAIT among the calls of one turn of the event loop, sent after all of them', async () => {
    // Arrange
    const sent: string[] = [];
    const store = redisStore({
      client: client(async (args) => {
        sent.push(String(args[0]));
        return 1;
      }),
      ...quiet,
      waitForReplicas: { count: 1, timeoutMs: 100 },
    });
    // Act: three calls in one turn, then one more once the first WAIT has been sent.
    const first = Promise.all([
      store.complete('a', 1, Uint8Array.of(1), 1000),
      store.complete('b', 1, Uint8Array.of(1), 1000),
      store.release('c', 1),
    ]);
    await new Promise((resolve) => setImmediate(resolve));
    const late = store.complete('d', 1, Uint8Array.of(1), 1000);
    const results = [...(await first), await late];
    // Assert
    expect(results).toEqual([true, true, true, true]);
    expect(sent).toEqual(['EVALSHA', 'EVALSHA', 'EVALSHA', 'WAIT', 'EVALSHA', 'WAIT']);
  });

  it('refuses a won claim when WAIT itself fails, and releases it', async () => {
    // Arrange: the claim script answers a fresh token; WAIT is refused (a replica, a proxy).
    const sent: string[] = [];
    const store = redisStore({
      client: client(async (args) => {
        sent.push(String(args[0]));
        if (args[0] === 'WAIT') throw new Error('ERR WAIT cannot be used with replica instances');
        return sent.length === 1 ? 1_700_000_000_000_000 : 1;
      }),
      ...quiet,
      waitForReplicas: { count: 1, timeoutMs: 100 },
    });
    // Act
    const error = await store.claim('k', { fingerprint: 'fp', leaseMs: 1000 }).catch((e) => e);
    await new Promise((resolve) => setTimeout(resolve, 10));
    // Assert
    expect(isStoreUnavailableError(error)).toBe(true);
    expect((error as Error).message).toMatch(/WAIT failed \(ERR WAIT cannot be used/);
    expect(sent).toEqual(['EVALSHA', 'WAIT', 'EVALSHA']);
  });

  it('applies a completion when WAIT itself fails, and rejects with ReplicationShortError carrying its answer and the WAIT error', async () => {
    // Arrange: the completion script answers 1 (applied); WAIT is refused.
    const waitError = new Error('ERR WAIT cannot be used with replica instances');
    const store = redisStore({
      client: client(async (args) => {
        if (args[0] === 'WAIT') throw waitError;
        return 1;
      }),
      ...quiet,
      waitForReplicas: { count: 1, timeoutMs: 100 },
    });
    // Act
    const error = await store.complete('k', 1, Uint8Array.of(1), 1000).catch((e) => e);
    // Assert
    expect(isReplicationShortError(error)).toBe(true);
    expect(error).toMatchObject({
      operation: 'complete',
      result: true,
      acknowledged: -1,
      required: 1,
      cause: waitError,
    });
    expect((error as Error).message).toMatch(
      /^Redis store: complete was applied on the primary but not confirmed by replicas: WAIT failed \(ERR WAIT cannot be used/,
    );
  });

  it('answers a fenced-out completion, release or step false whatever the count: nothing was written', async () => {
    // Arrange: every script answers 0 (fenced out); no replica acknowledges.
    const store = redisStore({
      client: client(async () => 0),
      ...quiet,
      waitForReplicas: { count: 1, timeoutMs: 100 },
    });
    // Act
    const answers = await Promise.all([
      store.complete('k', 1, Uint8Array.of(1), 1000),
      store.release('k', 1),
      store.saveStep('k', 1, 'charge', Uint8Array.of(1)),
    ]);
    // Assert
    expect(answers).toEqual([false, false, false]);
  });
});
