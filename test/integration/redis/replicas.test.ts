/**
 * `waitForReplicas` against a real primary and a real replica, both private servers this file starts: with
 * the replica up, every answered claim and completion is already on the replica; with it down, a won
 * claim fails (StoreUnavailableError, the handler never runs) within about the `WAIT` timeout, while a
 * completion, a release and a step's result are still applied and reported (`ReplicationShortError` from
 * the store, the engine's `onReplicationShort` hook); without the option, no `WAIT` is sent and the round
 * trips are unchanged.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  isReplicationShortError,
  isStoreUnavailableError,
  type ReplicationShortError,
} from '../../../src/core/errors.js';
import type { ReplicationShortHookEvent } from '../../../src/core/hooks.js';
import {
  type ClaimResult,
  createIdempotency,
  type RunContext,
  type RunOutcome,
} from '../../../src/index.js';
import { type RedisClientLike, redisStore } from '../../../src/redis/index.js';
import { defineStoreSuite } from '../../../src/testing/index.js';
import { deferred } from '../../helpers/deferred.js';
import { env, requireService } from '../../helpers/env.js';
import { connectClient, type RedisLib } from '../../helpers/redis-clients.js';
import { freePorts, PORT_SLICES, PrivateRedis } from '../../helpers/redis-servers.js';

let primary: PrivateRedis;
let replica: PrivateRedis;
let primaryAdmin: Redis;

const DAY = 86_400_000;

/** Wait until `check` holds, polling; throws after `timeoutMs`. */
async function until(what: string, check: () => Promise<boolean>, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The replicas the primary sees online. */
async function onlineReplicas(): Promise<number> {
  const info = await primaryAdmin.info('replication');
  return info.split('\n').filter((line) => /^slave\d+:.*state=online/.test(line)).length;
}

async function startReplica(): Promise<void> {
  await replica.start();
  await until('the replica to be online', async () => (await onlineReplicas()) === 1);
}

async function stopReplica(): Promise<void> {
  await replica.kill();
  await until('the primary to see no replica', async () => (await onlineReplicas()) === 0);
}

beforeAll(async () => {
  await requireService('Redis', env.redisUrl);
  const [primaryPort, replicaPort] = await freePorts(PORT_SLICES.replicas, 2);
  primary = new PrivateRedis(primaryPort!, ['--appendonly', 'no']);
  replica = new PrivateRedis(replicaPort!, [
    '--appendonly',
    'no',
    '--replicaof',
    '127.0.0.1',
    String(primaryPort),
  ]);
  await primary.start();
  primaryAdmin = new Redis(primary.url);
  await startReplica();
}, 60_000);

afterAll(async () => {
  primaryAdmin?.disconnect();
  await replica?.dispose();
  await primary?.dispose();
});

/** `client`, recording the name of every command the store sends through it. */
function recorded(client: RedisClientLike): { client: RedisClientLike; names: string[] } {
  const names: string[] = [];
  const wrapped = new Proxy(client as object, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== 'function') return value;
      const method = value as (...args: unknown[]) => unknown;
      if (property === 'sendCommand') {
        return (args: unknown[], ...rest: unknown[]) => {
          names.push(String(args[0]).toLowerCase());
          return method.call(target, args, ...rest);
        };
      }
      if (property === 'callBuffer') {
        return (command: string, ...rest: unknown[]) => {
          names.push(command.toLowerCase());
          return method.call(target, command, ...rest);
        };
      }
      return method.bind(target);
    },
  });
  return { client: wrapped as RedisClientLike, names };
}

/** The values of the keys under `prefix` on the server at `url`. */
async function valuesOn(url: string, prefix: string): Promise<string[]> {
  const admin = new Redis(url);
  try {
    const keys = await admin.keys(`${prefix}*`);
    const values = keys.length === 0 ? [] : await admin.mget(...keys);
    return values.map((value) => value ?? '');
  } finally {
    admin.disconnect();
  }
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => new Error('expected a failure'),
    (error: unknown) => error,
  );
}

describe.each<RedisLib>(['node-redis', 'ioredis'])('redis store waitForReplicas (%s)', (lib) => {
  const prefix = `replicas:${lib}:`;

  it('answers a claim, a completion and a burst once the replica holds their records, each call followed by a WAIT', async () => {
    // Arrange
    const connection = await connectClient(lib, primary.url);
    const { client, names } = recorded(connection.client);
    const store = redisStore({
      client,
      prefix: `${prefix}up:`,
      timeoutMs: 20_000,
      waitForReplicas: { count: 1, timeoutMs: '10s' },
      checkEvictionPolicy: false,
    });
    const idempotency = createIdempotency({ store, namespace: 'up', cache: false });
    const handled: number[] = [];
    try {
      // Act 1: a new key on an empty script cache (NOSCRIPT: the EVAL gets a WAIT of its own), another
      // new key, then its replay.
      await primaryAdmin.script('FLUSH');
      const cold = await idempotency.run({ key: 'cold' }, () => handled.push(0));
      const coldOnReplica = await valuesOn(replica.url, `${prefix}up:`);
      const coldNames = names.splice(0);
      const first = await idempotency.run({ key: 'one' }, () => handled.push(1));
      const onReplica = await valuesOn(replica.url, `${prefix}up:`);
      const newKey = names.splice(0);
      const replay = await idempotency.run({ key: 'one' }, () => handled.push(2));
      const replayed = names.splice(0);
      // Act 2: a burst of 30 runs in one tick (claimMany / completeMany).
      const burst = await Promise.all(
        Array.from({ length: 30 }, (_, i) => idempotency.run({ key: `burst-${i}` }, () => i)),
      );
      const burstValues = await valuesOn(replica.url, `${prefix}up:`);
      const burstNames = names.splice(0);

      // Assert: each call's script is followed by its WAIT, and the replica had the record when the
      // call answered (WAIT returns once the replica has applied the writes).
      expect(cold.status).toBe('executed');
      expect(coldNames).toEqual([
        'evalsha',
        'wait',
        'eval',
        'wait',
        'evalsha',
        'wait',
        'eval',
        'wait',
      ]);
      expect(coldOnReplica).toHaveLength(1);
      expect(coldOnReplica[0]).toMatch(/^c\|/);
      expect(first.status).toBe('executed');
      expect(newKey).toEqual(['evalsha', 'wait', 'evalsha', 'wait']);
      expect(onReplica).toHaveLength(2);
      expect(onReplica.every((value) => value.startsWith('c|'))).toBe(true);
      expect(replay.status).toBe('replayed');
      expect(replayed).toEqual(['evalsha', 'wait']);
      expect(handled).toEqual([0, 1]);
      expect(burst.map((result) => result.status)).toEqual(burst.map(() => 'executed'));
      expect(burstValues).toHaveLength(32);
      expect(burstValues.every((value) => value.startsWith('c|'))).toBe(true);
      // A batch shares one WAIT (and so do the calls of one turn of the event loop): far fewer commands
      // than two pairs per run, and never a script call without a WAIT after it.
      expect(burstNames.filter((name) => name === 'wait').length).toBeLessThanOrEqual(
        burstNames.filter((name) => name === 'evalsha' || name === 'eval').length,
      );
      expect(burstNames.at(-1)).toBe('wait');
      expect(burstNames.length).toBeLessThan(30);
    } finally {
      await connection.close();
    }
  });

  it('sends no WAIT and keeps 2 commands per new key and 1 per replay without the option', async () => {
    // Arrange
    const connection = await connectClient(lib, primary.url);
    const { client, names } = recorded(connection.client);
    const store = redisStore({ client, prefix: `${prefix}off:`, checkEvictionPolicy: false });
    const idempotency = createIdempotency({ store, namespace: 'off', cache: false });
    try {
      await idempotency.run({ key: 'warm' }, () => 0);
      names.splice(0);
      // Act
      await idempotency.run({ key: 'one' }, () => 1);
      const newKey = names.splice(0);
      await idempotency.run({ key: 'one' }, () => 2);
      const replay = names.splice(0);
      // Assert
      expect(newKey).toEqual(['evalsha', 'evalsha']);
      expect(replay).toEqual(['evalsha']);
    } finally {
      await connection.close();
    }
  });

  it('with the replica down, refuses a won claim within about the WAIT timeout: the handler never runs', async () => {
    // Arrange: a completed record (for a replay) and a crashed claim (for a takeover), replica up.
    const connection = await connectClient(lib, primary.url);
    const storeOptions = {
      client: connection.client,
      prefix: `${prefix}down:`,
      timeoutMs: 20_000,
      checkEvictionPolicy: false,
    };
    const waiting = redisStore({
      ...storeOptions,
      waitForReplicas: { count: 1, timeoutMs: 300 },
    });
    const plain = redisStore(storeOptions);
    const idempotency = createIdempotency({ store: waiting, namespace: 'down', cache: false });
    await idempotency.run({ key: 'done' }, () => 'stored');
    await plain.claim('crashed', { fingerprint: 'fp', leaseMs: 1, reserveMs: DAY });
    await stopReplica();
    try {
      const handled: string[] = [];

      // Act 1: a new key through the engine.
      const started = performance.now();
      const error = await failure(idempotency.run({ key: 'new' }, () => handled.push('new')));
      const elapsedMs = performance.now() - started;
      // Act 2: a burst (one claimMany, one WAIT).
      const burst = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          failure(idempotency.run({ key: `burst-${i}` }, () => handled.push(`burst-${i}`))),
        ),
      );
      // Act 3: a replay and a direct claim, whose release is then awaited on the primary.
      const replay = await idempotency.run({ key: 'done' }, () => handled.push('done'));
      const direct = await failure(waiting.claim('direct', { fingerprint: 'fp', leaseMs: 60_000 }));
      // Act 4: the takeover of the crashed claim, refused too, and left to its lease.
      const takeover = await failure(
        waiting.claim('crashed', { fingerprint: 'fp', leaseMs: 60_000, reserveMs: DAY }),
      );

      // Assert: nothing ran; each refusal is the store-unavailable answer, given by the WAIT's own timeout
      // (300 ms) rather than the call's (20 s).
      expect(handled).toEqual([]);
      expect(isStoreUnavailableError(error)).toBe(true);
      expect((error as Error).message).toMatch(
        /^Redis store: claim failed: it was written on the primary but acknowledged by 0 of 1 replica\(s\) within 300 ms/,
      );
      expect((burst[0] as Error).message).toBe((error as Error).message);
      expect(elapsedMs).toBeGreaterThanOrEqual(250);
      expect(elapsedMs).toBeLessThan(15_000);
      expect(burst.every(isStoreUnavailableError)).toBe(true);
      expect(replay.status).toBe('replayed');
      expect(isStoreUnavailableError(direct)).toBe(true);
      expect(isStoreUnavailableError(takeover)).toBe(true);
      // The fresh claim is released (a tombstone), so a retry need not wait out its lease; the takeover
      // is kept as an in-progress claim (attempt 2), so the crashed attempt's steps and reservation stay.
      const admin = new Redis(primary.url);
      try {
        await until('the refused claim to be released', async () =>
          ((await admin.get(`${prefix}down:{direct}`)) ?? '').startsWith('r|'),
        );
        const crashed = (await admin.get(`${prefix}down:{crashed}`)) ?? '';
        expect(
          crashed
            .split('|')
            .slice(0, 1)
            .concat(crashed.split('|')[4] ?? ''),
        ).toEqual(['p', '2']);
      } finally {
        admin.disconnect();
      }
    } finally {
      await connection.close();
      await startReplica();
    }
  }, 120_000);

  it('with the replica down, still applies a completion, a release and a step (the handler has run), each rejecting with ReplicationShortError, but refuses an extension', async () => {
    // Arrange: claims made while the replica is up, by a store without the option.
    const connection = await connectClient(lib, primary.url);
    const storeOptions = {
      client: connection.client,
      prefix: `${prefix}complete:`,
      timeoutMs: 20_000,
      checkEvictionPolicy: false,
    };
    const plain = redisStore(storeOptions);
    const waiting = redisStore({ ...storeOptions, waitForReplicas: { count: 1, timeoutMs: 300 } });
    const toComplete = await plain.claim('c', { fingerprint: 'fp', leaseMs: 60_000 });
    const toExtend = await plain.claim('e', { fingerprint: 'fp', leaseMs: 60_000 });
    const inBatch = await plain.claim('b', { fingerprint: 'fp', leaseMs: 60_000 });
    const toRelease = await plain.claim('r', { fingerprint: 'fp', leaseMs: 60_000 });
    const withStep = await plain.claim('s', { fingerprint: 'fp', leaseMs: 60_000 });
    const many = [
      await plain.claim('m1', { fingerprint: 'fp', leaseMs: 60_000 }),
      await plain.claim('m2', { fingerprint: 'fp', leaseMs: 60_000 }),
    ];
    const twoCalls = await plain.claim('t', { fingerprint: 'fp', leaseMs: 60_000 });
    const claims = [toComplete, toExtend, inBatch, toRelease, withStep, twoCalls, ...many];
    if (!claims.every((claim) => claim.claimed)) throw new Error('fresh keys must be claimed');
    const tokenOf = (claim: ClaimResult) => (claim.claimed ? claim.token : -1);
    await stopReplica();
    try {
      // Act
      const completed = await failure(
        waiting.complete('c', tokenOf(toComplete), Buffer.from('"ok"'), DAY),
      );
      const extended = await failure(waiting.extend('e', tokenOf(toExtend), 60_000));
      const released = await failure(waiting.release('r', tokenOf(toRelease)));
      const saved = await failure(
        waiting.saveStep('s', tokenOf(withStep), 'charge', Buffer.from('"ch_1"')),
      );
      // A fenced-out completion wrote nothing: answered false, as without the option.
      const fenced = await waiting.complete('m1', tokenOf(many[0]!) + 1, Buffer.from('"x"'), DAY);
      // One completeMany: the applied item and the fenced-out one keep apart.
      const batch = await failure(
        waiting.completeMany([
          { key: 'm1', token: tokenOf(many[0]!), outcome: Buffer.from('"1"'), retentionMs: DAY },
          {
            key: 'm2',
            token: tokenOf(many[1]!) + 1,
            outcome: Buffer.from('"2"'),
            retentionMs: DAY,
          },
        ]),
      );
      // One script call completing 'b' and claiming a new key and the completed 'c' (a replay).
      const combined = await failure(
        waiting.completeAndClaimMany(
          [{ key: 'b', token: tokenOf(inBatch), outcome: Buffer.from('"b"'), retentionMs: DAY }],
          [
            { key: 'new', fingerprint: 'fp', leaseMs: 60_000 },
            { key: 'c', fingerprint: 'fp', leaseMs: 60_000 },
          ],
        ),
      );
      // The same sent as two calls (a token that is not a safe integer is fenced out without asking Redis).
      const separately = await failure(
        waiting.completeAndClaimMany(
          [
            { key: 'm2', token: 2 ** 60, outcome: Buffer.from('"x"'), retentionMs: DAY },
            { key: 't', token: tokenOf(twoCalls), outcome: Buffer.from('"t"'), retentionMs: DAY },
            {
              key: 'm2',
              token: tokenOf(many[1]!) + 1,
              outcome: Buffer.from('"y"'),
              retentionMs: DAY,
            },
          ],
          [
            { key: 'new2', fingerprint: 'fp', leaseMs: 60_000 },
            { key: 't', fingerprint: 'fp', leaseMs: 60_000 },
          ],
        ),
      );
      // Assert: each applied write rejects with its answer and the replicas' count, never as a failure.
      const short = { result: true, acknowledged: 0, required: 1 };
      expect(isReplicationShortError(completed)).toBe(true);
      expect(completed).toMatchObject({ ...short, operation: 'complete' });
      expect((completed as Error).message).toBe(
        'Redis store: complete was applied on the primary but acknowledged by 0 of 1 replica(s) within 300 ms (waitForReplicas): a failover before the replicas have it can lose it',
      );
      expect(released).toMatchObject({ ...short, operation: 'release' });
      expect(isReplicationShortError(released)).toBe(true);
      expect(saved).toMatchObject({ ...short, operation: 'saveStep' });
      expect(isReplicationShortError(saved)).toBe(true);
      expect(fenced).toBe(false);
      const batchItems = ((batch as Error).cause as { results: unknown[] }).results;
      expect(isReplicationShortError(batchItems[0])).toBe(true);
      expect(batchItems[0]).toMatchObject({ ...short, operation: 'complete' });
      expect(batchItems[1]).toBe(false);
      expect(isStoreUnavailableError(combined)).toBe(true);
      const partial = (combined as Error).cause as {
        results: { completed: unknown[]; claimed: unknown[] };
      };
      expect(partial.results.completed).toHaveLength(1);
      expect(isReplicationShortError(partial.results.completed[0])).toBe(true);
      expect(partial.results.completed[0] as ReplicationShortError).toMatchObject({
        ...short,
        operation: 'complete',
      });
      expect(isStoreUnavailableError(partial.results.claimed[0])).toBe(true);
      expect(partial.results.claimed[1]).toMatchObject({
        claimed: false,
        record: { status: 'completed' },
      });
      // The two calls answer as the one: both lists' items, the claims sent after the completions.
      expect(isStoreUnavailableError(separately)).toBe(true);
      const apart = (separately as Error).cause as {
        results: { completed: unknown[]; claimed: unknown[] };
      };
      expect(apart.results.completed).toHaveLength(3);
      expect(apart.results.completed[0]).toBe(false);
      expect(apart.results.completed[1] as ReplicationShortError).toMatchObject({
        ...short,
        operation: 'complete',
      });
      expect(apart.results.completed[2]).toBe(false);
      expect(isStoreUnavailableError(apart.results.claimed[0])).toBe(true);
      expect(apart.results.claimed[1]).toMatchObject({
        claimed: false,
        record: { status: 'completed' },
      });
      expect((await valuesOn(primary.url, `${prefix}complete:{t}`))[0]).toMatch(/^c\|/);
      expect((await valuesOn(primary.url, `${prefix}complete:{b}`))[0]).toMatch(/^c\|/);
      expect((await valuesOn(primary.url, `${prefix}complete:{c}`))[0]).toMatch(/^c\|/);
      expect((await valuesOn(primary.url, `${prefix}complete:{m1}`))[0]).toMatch(/^c\|/);
      expect((await valuesOn(primary.url, `${prefix}complete:{r}`))[0]).toMatch(/^r\|/);
      const admin = new Redis(primary.url);
      try {
        expect(await admin.hget(`${prefix}complete:{s}:s`, 'charge')).not.toBeNull();
      } finally {
        admin.disconnect();
      }
      expect(isStoreUnavailableError(extended)).toBe(true);
    } finally {
      await connection.close();
      await startReplica();
    }
  }, 120_000);

  /**
   * Runs whose claims are made with the replica up and whose handlers then wait at a gate: a charge that
   * records a step and completes, a declined card (a release), a refusal kept as the key's outcome
   * (`storeErrors`, a completion of the error) and a burst completing together (a batch). With `stop`, the
   * replica is stopped before the gate opens, so every write after the handlers ran falls short of it.
   */
  async function settleAfterClaims(namespace: string, stop: boolean) {
    const connection = await connectClient(lib, primary.url);
    const storePrefix = `${prefix}${namespace}:`;
    const store = redisStore({
      client: connection.client,
      prefix: storePrefix,
      timeoutMs: 20_000,
      waitForReplicas: { count: 1, timeoutMs: 300 },
      checkEvictionPolicy: false,
    });
    const shorts: ReplicationShortHookEvent[] = [];
    const storeErrors: unknown[] = [];
    const idempotency = createIdempotency({
      store,
      namespace,
      cache: false,
      // No extension falls in the test (an extension short of the replica is refused).
      leaseMs: '5m',
      hooks: {
        onReplicationShort: (event) => shorts.push(event),
        onStoreError: (event) => storeErrors.push(event),
      },
    });
    const gate = deferred();
    const started: string[] = [];
    const handled: string[] = [];
    const handler =
      <T>(name: string, body: (ctx: RunContext) => T) =>
      async (ctx: RunContext) => {
        started.push(name);
        await gate.promise;
        handled.push(name);
        return body(ctx);
      };
    const runs = [
      idempotency.run(
        { key: 'charge' },
        handler('charge', (ctx) => ctx.step('provider', () => 'ch_1')),
      ),
      idempotency.run(
        { key: 'declined' },
        handler('declined', () => {
          throw new Error('card declined');
        }),
      ),
      idempotency.run(
        { key: 'refused', storeErrors: true },
        handler('refused', () => {
          throw new Error('insufficient funds');
        }),
      ),
      ...Array.from({ length: 5 }, (_, i) =>
        idempotency.run(
          { key: `burst-${i}` },
          handler(`burst-${i}`, () => i),
        ),
      ),
    ];
    try {
      await until('every handler to hold its claim', async () => started.length === runs.length);
      if (stop) await stopReplica();
      gate.resolve();
      const settled = await Promise.allSettled(runs);
      const replay = await idempotency.run({ key: 'charge' }, () => 'again');
      const admin = new Redis(primary.url);
      let values: Record<string, string>;
      try {
        values = Object.fromEntries(
          await Promise.all(
            ['charge', 'declined', 'refused', 'burst-0', 'burst-4'].map(
              async (key) =>
                [
                  key,
                  (await admin.get(`${storePrefix}{${idempotency.storageKeyFor(key)}}`)) ?? '',
                ] as const,
            ),
          ),
        );
      } finally {
        admin.disconnect();
      }
      return { idempotency, settled, replay, shorts, storeErrors, handled, values };
    } finally {
      await connection.close();
      if (stop) await startReplica();
    }
  }

  it('with the replica down after the claims, applies each write made after a handler ran and reports it through onReplicationShort, with the key, the namespace and the replicas that acknowledged', async () => {
    // Arrange, Act
    const namespace = `short-${lib}`;
    const { idempotency, settled, replay, shorts, storeErrors, handled, values } =
      await settleAfterClaims(namespace, true);

    // Assert: every run answered as it would have with the replica up; each handler ran once.
    const [charge, declined, refused, ...burst] = settled;
    expect(charge).toMatchObject({
      status: 'fulfilled',
      value: { status: 'executed', value: 'ch_1' },
    });
    expect(declined).toMatchObject({ status: 'rejected', reason: { message: 'card declined' } });
    expect(refused).toMatchObject({
      status: 'rejected',
      reason: { message: 'insufficient funds' },
    });
    expect(burst.map((run) => run.status === 'fulfilled' && run.value.status)).toEqual(
      burst.map(() => 'executed'),
    );
    expect(replay).toEqual({ status: 'replayed', value: 'ch_1' });
    expect([...handled].sort()).toEqual(
      ['charge', 'declined', 'refused', ...burst.map((_, i) => `burst-${i}`)].sort(),
    );
    // Each write is on the primary: the completions, the stored error, the release's tombstone.
    expect(values).toMatchObject({
      charge: expect.stringMatching(/^c\|/),
      declined: expect.stringMatching(/^r\|/),
      refused: expect.stringMatching(/^c\|/),
      'burst-0': expect.stringMatching(/^c\|/),
      'burst-4': expect.stringMatching(/^c\|/),
    });
    // One report per write short of the replica, none of them a store error.
    const tokenOf = (run: PromiseSettledResult<RunOutcome<unknown>> | undefined) =>
      run?.status === 'fulfilled' && run.value.status === 'executed'
        ? run.value.token
        : expect.any(Number);
    const expected = [
      { key: 'charge', operation: 'saveStep', token: tokenOf(charge) },
      { key: 'charge', operation: 'complete', token: tokenOf(charge) },
      { key: 'declined', operation: 'release', token: expect.any(Number) },
      { key: 'refused', operation: 'complete', token: expect.any(Number) },
      ...burst.map((run, i) => ({ key: `burst-${i}`, operation: 'complete', token: tokenOf(run) })),
    ].map(({ key, operation, token }) => ({
      namespace,
      storageKey: idempotency.storageKeyFor(key),
      operation,
      token,
      acknowledged: 0,
      required: 1,
    }));
    const order = (event: { storageKey: string; operation: string }) =>
      `${event.storageKey}:${event.operation}`;
    const sorted = <E extends { storageKey: string; operation: string }>(events: E[]) =>
      [...events].sort((a, b) => order(a).localeCompare(order(b)));
    expect(sorted(shorts)).toEqual(sorted(expected));
    expect(storeErrors).toEqual([]);
  }, 120_000);

  it('with the replica up, reports nothing for the same writes', async () => {
    // Arrange, Act
    const { settled, shorts, storeErrors, values } = await settleAfterClaims(`up-${lib}`, false);
    // Assert
    expect(settled.map((run) => run.status)).toEqual([
      'fulfilled',
      'rejected',
      'rejected',
      ...Array.from({ length: 5 }, () => 'fulfilled'),
    ]);
    expect(values.charge).toMatch(/^c\|/);
    expect(values.declined).toMatch(/^r\|/);
    expect(shorts).toEqual([]);
    expect(storeErrors).toEqual([]);
  }, 120_000);
});

// The whole store contract still holds with the option on (the replica up): WAIT changes no answer.
let suiteConnection: Awaited<ReturnType<typeof connectClient>> | undefined;
afterAll(async () => {
  await suiteConnection?.close();
});
defineStoreSuite({
  name: 'redis (node-redis, waitForReplicas)',
  storeClock: 'backend',
  shortLeaseMs: 600,
  createStore: async (checkPrefix) => {
    suiteConnection ??= await connectClient('node-redis', primary.url);
    return redisStore({
      client: suiteConnection.client,
      prefix: `replicas:suite:${checkPrefix}`,
      timeoutMs: 20_000,
      waitForReplicas: { count: 1, timeoutMs: '10s' },
      checkEvictionPolicy: false,
    });
  },
  // Exactly one winner per key across processes, each claim followed by its WAIT.
  crossProcess: {
    module: new URL('../../helpers/redis-clients.ts', import.meta.url),
    // The primary's port is chosen in beforeAll: read when the storm sends the argument to its workers.
    argument: {
      lib: 'node-redis',
      get url() {
        return primary.url;
      },
      prefix: 'replicas:storm:',
      waitForReplicas: { count: 1, timeoutMs: 10_000 },
    },
    processes: 3,
    claimsPerProcess: 500,
    keys: 100,
  },
});
