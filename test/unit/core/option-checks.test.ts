import { describe, expect, it } from 'vitest';
import {
  createIdempotency,
  type Duration,
  isInvalidOptionsError,
  memoryStore,
  toMs,
} from '../../../src/index.js';

describe('option checks', () => {
  it.each([
    [true, /got true/],
    [{}, /got an object/],
    [[], /got an array/],
    [10n, /got 10n/],
  ])(
    'refuses leaseMs %s, which is neither a number nor a string, with InvalidOptionsError',
    (value, shown) => {
      // Act / Assert: from the engine's options and from a single run alike
      const leaseMs = value as unknown as Duration;
      expect(() => createIdempotency({ store: memoryStore(), leaseMs })).toThrow(
        expect.objectContaining({ code: 'invalid_options', message: expect.stringMatching(shown) }),
      );
      expect(() => toMs(leaseMs, 'leaseMs')).toThrow(
        /^leaseMs: must be a number of ms or a string/,
      );
    },
  );

  it.each([
    ['0s', '"0s"'],
    ['200000d', '"200000d"'],
    [0, '0'],
    [Number.NaN, 'NaN'],
  ] as const)('refuses the out-of-range duration %o, shown as %s', (value, shown) => {
    // Act / Assert
    expect(() => toMs(value as Duration, 'leaseMs')).toThrow(
      `leaseMs: must be a positive duration of at most 100 years, got ${shown}`,
    );
  });

  it('refuses a non-duration leaseMs on run() too, before anything is claimed', async () => {
    const idempotency = createIdempotency({ store: memoryStore() });
    await expect(
      idempotency.run({ key: 'k', leaseMs: {} as unknown as Duration }, () => 1),
    ).rejects.toSatisfy(isInvalidOptionsError);
  });

  it.each([Number.NaN, 0, -1, 2.5, Number.POSITIVE_INFINITY])(
    'refuses cache.maxEntries %s: it must be a positive integer',
    (maxEntries) => {
      expect(() => createIdempotency({ store: memoryStore(), cache: { maxEntries } })).toThrow(
        expect.objectContaining({
          code: 'invalid_options',
          message: expect.stringMatching(/^cache\.maxEntries must be a positive integer/),
        }),
      );
    },
  );

  it.each([Number.NaN, 0, -1, 2.5, '16MiB'])(
    'refuses cache.maxBytes %s: it must be a positive integer',
    (maxBytes) => {
      expect(() =>
        createIdempotency({ store: memoryStore(), cache: { maxBytes: maxBytes as number } }),
      ).toThrow(
        expect.objectContaining({
          code: 'invalid_options',
          message: expect.stringMatching(/^cache\.maxBytes must be a positive integer/),
        }),
      );
    },
  );

  it('refuses a cache field it does not know, rather than ignore it', () => {
    expect(() =>
      createIdempotency({
        store: memoryStore(),
        cache: { maxSize: 10 } as unknown as { maxEntries: number },
      }),
    ).toThrow(
      expect.objectContaining({
        code: 'invalid_options',
        message: 'cache: unknown field "maxSize"; the fields are maxEntries, maxBytes',
      }),
    );
  });

  it('serves from the store, not the cache, an outcome larger than half of cache.maxBytes', async () => {
    // Arrange
    const store = memoryStore();
    const claim = store.claim.bind(store);
    let claims = 0;
    store.claim = (...args) => {
      claims++;
      return claim(...args);
    };
    const idempotency = createIdempotency({ store, cache: { maxBytes: 1024 }, batch: false });
    await idempotency.run({ key: 'large' }, () => 'x'.repeat(2048));
    // Act
    const replay = await idempotency.run({ key: 'large' }, () => 'again');
    // Assert: replayed, through a second claim (before, the cache answered and maxBytes was ignored).
    expect(replay.status).toBe('replayed');
    expect(claims).toBe(2);
  });

  it('still takes a positive integer cache.maxEntries, or no cache', () => {
    expect(() =>
      createIdempotency({ store: memoryStore(), cache: { maxEntries: 1 } }),
    ).not.toThrow();
    expect(() => createIdempotency({ store: memoryStore(), cache: false })).not.toThrow();
  });
});

describe('engine options are checked, not coerced', () => {
  it.each([
    ['failOpen', { failOpen: 'false' }, /^failOpen: expected true or false, got "false"/],
    ['extendLease', { extendLease: 'no' }, /^extendLease: expected true or false, got "no"/],
    [
      'storeErrors',
      { storeErrors: 'false' },
      /^storeErrors: expected true, false or a function of the error, got "false"/,
    ],
    [
      'codec',
      { codec: {} },
      /^codec: expected an object with encode and decode functions, got \{\}/,
    ],
    ['namespace', { namespace: 123 }, /^namespace: expected a string, got 123/],
    // A string from a config file was read as settings: the cache and batching stayed on.
    ['cache', { cache: 'false' }, /^cache: expected false or an object of settings, got "false"/],
    ['cache', { cache: 0 }, /^cache: expected false or an object of settings, got 0/],
    ['batch', { batch: 'false' }, /^batch: expected false or an object of settings, got "false"/],
    ['hooks', { hooks: 'nope' }, /^hooks: expected an object of functions, got "nope"/],
    [
      'a hook',
      { hooks: { onExecuted: 'log' } },
      /^hooks\.onExecuted: expected a function, got "log"/,
    ],
    [
      'cache.maxEntries',
      { cache: { maxEntries: '10' } },
      /^cache\.maxEntries must be a positive integer, got "10"/,
    ],
  ])('refuses %s with InvalidOptionsError', (_name, bad, message) => {
    expect(() =>
      createIdempotency({ store: memoryStore(), ...(bad as Record<string, unknown>) }),
    ).toThrow(
      expect.objectContaining({ code: 'invalid_options', message: expect.stringMatching(message) }),
    );
  });

  it.each([
    ['failOpen', { failOpen: 'false' }],
    ['storeErrors', { storeErrors: 1 }],
    ['codec', { codec: { encode: () => new Uint8Array() } }],
  ])('refuses a %s override on run() before anything is claimed', async (_name, bad) => {
    // Arrange: a store that counts claims.
    const store = memoryStore();
    let claims = 0;
    const counting = {
      ...store,
      claim: (...args: Parameters<typeof store.claim>) => {
        claims++;
        return store.claim(...args);
      },
    };
    const idempotency = createIdempotency({ store: counting, batch: false });
    let runs = 0;
    // Act
    const outcome = idempotency.run({ key: 'k', ...(bad as Record<string, unknown>) }, () => {
      runs++;
    });
    // Assert
    await expect(outcome).rejects.toSatisfy(isInvalidOptionsError);
    expect({ claims, runs }).toEqual({ claims: 0, runs: 0 });
  });

  it('takes true, null or nothing for cache and batch as their defaults, and false as off', () => {
    for (const value of [true, null, undefined, false]) {
      const options = { store: memoryStore(), cache: value, batch: value };
      expect(() => createIdempotency(options as never)).not.toThrow();
    }
  });

  it('takes null as not given, and the empty namespace as the namespace it always was', async () => {
    // A JSON config writes null for what it leaves out; `??` always read it as the default.
    const fromJson = createIdempotency({
      store: memoryStore(),
      failOpen: null,
      storeErrors: null,
      codec: null,
      namespace: null,
    } as never);
    expect(fromJson.namespace).toBe('default');
    // A deployment on namespace '' keeps its keys: refusing it would orphan every retained outcome.
    const empty = createIdempotency({ store: memoryStore(), namespace: '' });
    expect(empty.namespace).toBe('');
    expect(empty.storageKeyFor('k')).not.toBe(fromJson.storageKeyFor('k'));
  });

  it('still takes the documented values', async () => {
    const idempotency = createIdempotency({
      store: memoryStore(),
      namespace: 'payments',
      failOpen: true,
      extendLease: false,
      storeErrors: (error) => error instanceof RangeError,
    });
    await expect(
      idempotency.run({ key: 'k', failOpen: false, storeErrors: true }, () => 'ok'),
    ).resolves.toMatchObject({ status: 'executed', value: 'ok' });
  });
});

describe('a storeErrors function that throws', () => {
  it('releases the claim at once, as storeErrors: false does, so a retry runs without waiting for the lease', async () => {
    // Arrange: the predicate reads a property of an error that is undefined.
    const idempotency = createIdempotency({
      store: memoryStore(),
      extendLease: false,
      leaseMs: '1h',
      storeErrors: (error) => (error as { response: { status: number } }).response.status === 402,
    });
    const thrown = new Error('network down');
    // Act
    await expect(idempotency.run({ key: 'k' }, () => Promise.reject(thrown))).rejects.toBe(thrown);
    // Assert: released, not held for the hour-long lease.
    await expect(idempotency.run({ key: 'k' }, () => 'retried')).resolves.toMatchObject({
      status: 'executed',
      value: 'retried',
    });
  });
});

describe('the scope of a run', () => {
  it('refuses a scope that would be keyed by its JSON, so that two callers never share one by accident', async () => {
    // Arrange: objects of a class with private fields are all `{}` in JSON.
    class User {
      readonly #id: string;
      constructor(id: string) {
        this.#id = id;
      }
      get id() {
        return this.#id;
      }
    }
    const idempotency = createIdempotency({ store: memoryStore() });
    let runs = 0;
    // Act / Assert: refused before anything is claimed, whatever the value.
    for (const scope of [new User('alice'), { tenant: 't1' }, ['t1'], true, () => 't1']) {
      await expect(
        idempotency.run({ key: 'k', scope: scope as never }, () => {
          runs++;
        }),
      ).rejects.toThrow(expect.objectContaining({ code: 'invalid_options' }));
      expect(() => idempotency.storageKeyFor('k', scope as never)).toThrow(
        /scope: expected a string/,
      );
    }
    expect(runs).toBe(0);
  });

  it('names what a refused scope is, never what it holds (it reaches logs and error responses)', () => {
    // Arrange: what a scope function returns by mistake is often the authenticated user.
    class User {
      constructor(readonly email: string) {}
    }
    const idempotency = createIdempotency({ store: memoryStore() });
    const refusal = (scope: unknown) => {
      try {
        idempotency.storageKeyFor('k', scope as never);
      } catch (error) {
        return (error as Error).message;
      }
      return undefined;
    };
    // Act / Assert
    expect(refusal(new User('alice@example.com'))).toBe(
      'scope: expected a string, got an object (User)',
    );
    expect(refusal({ email: 'alice@example.com' })).toBe('scope: expected a string, got an object');
    expect(refusal(['alice@example.com'])).toBe('scope: expected a string, got an array');
    expect(refusal(Number.NaN)).toBe('scope: expected a string, got NaN');
    expect(refusal(true)).toBe('scope: expected a string, got boolean');
  });

  it('keeps strings, an absent scope, and the numbers callers have used (their keys unchanged)', async () => {
    const idempotency = createIdempotency({ store: memoryStore() });
    expect(idempotency.storageKeyFor('k', undefined)).toBe(idempotency.storageKeyFor('k', ''));
    expect(idempotency.storageKeyFor('k', null as never)).toBe(idempotency.storageKeyFor('k', ''));
    // A numeric id stays keyed as it always was: apart from the string of the same digits.
    expect(idempotency.storageKeyFor('k', 42 as never)).not.toBe(
      idempotency.storageKeyFor('k', '42'),
    );
    await expect(
      idempotency.run({ key: 'k', scope: 42 as never }, () => 'ok'),
    ).resolves.toMatchObject({
      status: 'executed',
    });
  });
});
