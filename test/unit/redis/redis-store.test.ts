import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { isInvalidOptionsError, isStoreUnavailableError } from '../../../src/core/errors.js';
import { type RedisStoreOptions, redisStore } from '../../../src/redis/index.js';

// Structural stand-ins for a node-redis client (no I/O): they check the store's own behaviour around the
// client — timeouts, error mapping, the NOSCRIPT fallback and option validation.
type Send = (args: ReadonlyArray<string | Buffer>) => Promise<unknown>;
const client = (send: Send) => ({
  sendCommand: (args: ReadonlyArray<string | Buffer>) => send(args),
});
const quiet = { checkEvictionPolicy: false } as const;

describe('redis store without a server', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('rejects with StoreUnavailableError after timeoutMs when Redis never answers', async () => {
    // Arrange
    const store = redisStore({
      client: client(() => new Promise(() => {})),
      timeoutMs: 2000,
      ...quiet,
    });
    // Act
    const pending = store.claim('k', { fingerprint: 'fp', leaseMs: 1000 }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(1999);
    const early = await Promise.race([pending, Promise.resolve('still pending')]);
    await vi.advanceTimersByTimeAsync(1);
    const error = await pending;
    // Assert
    expect(early).toBe('still pending');
    expect(isStoreUnavailableError(error)).toBe(true);
    expect((error as Error).message).toMatch(/claim got no answer within 2000 ms/);
  });

  it('keeps a late failure of a timed-out call from becoming an unhandled rejection', async () => {
    // Arrange
    let fail: (error: Error) => void = () => {};
    const store = redisStore({
      client: client(() => new Promise((_, reject) => (fail = reject))),
      timeoutMs: 10,
      ...quiet,
    });
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', listener);
    // Act
    const error = store.get('k').catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(10);
    await error;
    fail(new Error('connection reset'));
    await vi.advanceTimersByTimeAsync(0);
    vi.useRealTimers();
    await new Promise((resolve) => setTimeout(resolve, 10));
    process.off('unhandledRejection', listener);
    // Assert
    expect(isStoreUnavailableError(await error)).toBe(true);
    expect(unhandled).toEqual([]);
  });

  it('wraps a client error in StoreUnavailableError with the cause', async () => {
    // Arrange
    const cause = new Error('ECONNREFUSED');
    const store = redisStore({ client: client(() => Promise.reject(cause)), ...quiet });
    // Act
    const error = await store.complete('k', 1, Uint8Array.of(1), 1000).catch((e: unknown) => e);
    // Assert
    expect(isStoreUnavailableError(error)).toBe(true);
    expect((error as Error).cause).toBe(cause);
  });

  it('falls back from EVALSHA to EVAL on NOSCRIPT, once, with the same keys and arguments', async () => {
    // Arrange
    const sent: Array<ReadonlyArray<string | Buffer>> = [];
    const store = redisStore({
      client: client(async (args) => {
        sent.push(args);
        if (args[0] === 'EVALSHA') throw new Error('NOSCRIPT No matching script. Please use EVAL.');
        return 1;
      }),
      prefix: 'p:',
      ...quiet,
    });
    // Act
    const released = await store.release('key', 7);
    // Assert
    expect(released).toBe(true);
    expect(sent.map((args) => args[0])).toEqual(['EVALSHA', 'EVAL']);
    expect(sent[0]?.slice(2)).toEqual(['2', 'p:{key}', 'p:{key}:s', '7', '60000']);
    expect(sent[1]?.slice(2)).toEqual(sent[0]?.slice(2));
  });

  it('refuses bad options and non-positive durations with InvalidOptionsError', async () => {
    // Arrange
    const ok = client(async () => 1);
    // Act + Assert
    for (const options of [
      { prefix: 'a{b}' },
      { timeoutMs: 0 },
      { timeoutMs: Number.NaN },
      { tokenFloorMs: -1 },
    ]) {
      let error: unknown;
      try {
        redisStore({ client: ok, ...quiet, ...options });
      } catch (e) {
        error = e;
      }
      expect(isInvalidOptionsError(error), JSON.stringify(options)).toBe(true);
    }
    const store = redisStore({ client: ok, ...quiet });
    await expect(store.claim('k', { fingerprint: '', leaseMs: 0 })).rejects.toMatchObject({
      code: 'invalid_options',
    });
  });

  it('fences out a token that is not a safe integer without asking Redis', async () => {
    // Arrange
    const sent: unknown[] = [];
    const store = redisStore({ client: client(async (args) => sent.push(args)), ...quiet });
    // Act
    const results = [
      await store.release('k', 1.5),
      await store.extend('k', Number.NaN, 1000),
      await store.saveStep('k', 2 ** 60, 'charge', Uint8Array.of(1)),
      await store.loadSteps('k', -0.5),
    ];
    // Assert
    expect(results).toEqual([false, false, false, undefined]);
    expect(sent).toEqual([]);
  });

  it('passes the record key and its steps key (same hash tag) to the step scripts', async () => {
    // Arrange
    const sent: Array<ReadonlyArray<string | Buffer>> = [];
    const replies: unknown[] = [1, [Buffer.from('charge'), Buffer.from([0, 255])], null];
    const store = redisStore({
      client: client(async (args) => {
        sent.push(args);
        return replies.shift();
      }),
      prefix: 'p:',
      ...quiet,
    });
    // Act
    const saved = await store.saveStep('key', 7, 'charge', Uint8Array.of(0, 255));
    const steps = await store.loadSteps('key', 7);
    const fenced = await store.loadSteps('key', 8);
    // Assert
    expect(saved).toBe(true);
    expect(steps).toEqual({ charge: Uint8Array.of(0, 255) });
    expect(fenced).toBeUndefined();
    expect(sent[0]?.slice(2, 7)).toEqual(['2', 'p:{key}', 'p:{key}:s', '7', 'charge']);
    expect(sent[1]?.slice(2)).toEqual(['2', 'p:{key}', 'p:{key}:s', '7']);
    expect(store.capabilities.steps).toBe(true);
  });

  it('refuses a step name outside [A-Za-z0-9._:-]{1,100} (the lineage field is `#`)', async () => {
    // Arrange
    const sent: unknown[] = [];
    const store = redisStore({ client: client(async (args) => sent.push(args)), ...quiet });
    // Act + Assert
    for (const name of ['#', '', 'a b', 'x'.repeat(101), 'é']) {
      await expect(store.saveStep('k', 1, name, Uint8Array.of(1)), name).rejects.toMatchObject({
        code: 'invalid_options',
      });
    }
    expect(sent).toEqual([]);
  });
});

describe('redis store options are checked, never coerced', () => {
  const ok = client(async () => 1);

  it.each([
    [{ timeoutMs: '500' }, /^redisStore: timeoutMs: .* got "500"$/],
    [{ timeoutMs: 2 ** 31 }, /^redisStore: timeoutMs: .*at most 2147483647 ms.* got 2147483648$/],
    [{ tokenFloorMs: '60000' }, /^redisStore: tokenFloorMs: .* got "60000"$/],
    [{ checkEvictionPolicy: 'false' }, /^redisStore: checkEvictionPolicy: .*got "false"$/],
    [{ onWarning: 'log' }, /^redisStore: onWarning: expected a function, got "log"$/],
    [{ prefix: 5 }, /^redisStore: `prefix` must be a string without `\{` or `\}`, got 5$/],
    [
      { prefix: '' },
      /^redisStore: `prefix` must not be empty: .*every other `\{…\}` key of the database/,
    ],
    [{ timeout: 500 }, /^redisStore: unknown field "timeout"; the fields are client, /],
  ])('refuses %o when created, showing the value with its type', (bad, message) => {
    // Act / Assert
    expect(() => redisStore({ client: ok, ...(bad as object) } as RedisStoreOptions)).toThrow(
      expect.objectContaining({ code: 'invalid_options', message: expect.stringMatching(message) }),
    );
  });

  it("takes timeoutMs as a duration string ('500ms'), as every other …Ms option does", async () => {
    // Arrange
    vi.useFakeTimers();
    try {
      const store = redisStore({
        client: client(() => new Promise(() => {})),
        timeoutMs: '500ms',
        ...quiet,
      });
      // Act
      const pending = store.get('k').catch((e: unknown) => e);
      await vi.advanceTimersByTimeAsync(500);
      const error = await pending;
      // Assert
      expect(isStoreUnavailableError(error)).toBe(true);
      expect((error as Error).message).toMatch(/get got no answer within 500 ms/);
    } finally {
      vi.useRealTimers();
    }
  });

  it("takes tokenFloorMs as a duration string ('2m'): the release's tombstone lives that long", async () => {
    // Arrange
    const sent: string[][] = [];
    const store = redisStore({
      client: client(async (args) => {
        sent.push(args.map(String));
        return 1;
      }),
      tokenFloorMs: '2m',
      ...quiet,
    });
    // Act
    await store.release('k', 1).catch(() => undefined);
    // Assert: the script's last argument is the tombstone's life in ms.
    expect(sent.at(-1)?.at(-1)).toBe('120000');
  });

  it('skips the eviction check only for false, and runs it for null (not given)', async () => {
    // Arrange
    const asked: string[] = [];
    const recording = client(async (args) => {
      asked.push(args.map(String).join(' '));
      return ['maxmemory-policy', 'noeviction'];
    });
    // Act
    await redisStore({ client: recording, checkEvictionPolicy: false }).ready;
    const off = asked.length;
    await redisStore({ client: recording, checkEvictionPolicy: null as never }).ready;
    // Assert
    expect(off).toBe(0);
    expect(asked).toContain('CONFIG GET maxmemory-policy');
  });
});
