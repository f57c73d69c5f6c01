/**
 * The store conformance checks, as plain async functions that throw on a violation. `defineStoreSuite`
 * wraps each in a test; keeping them framework-free lets a test run them against a deliberately broken
 * store and show that they fail it.
 * @module
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { InvalidOptionsError, isInvalidOptionsError } from '../core/errors.js';
import type { IdempotencyRecord } from '../core/record.js';
import type { Store } from '../store/store.js';
import { type CrossProcessOptions, runClaimStorm } from './claim-storm.js';
import { checkStoreClock, type StoreClock } from './clock-check.js';
import { checkListCrashed } from './list-crashed-check.js';
import { checkLosingClaim } from './losing-claim-check.js';
import { CROSS_PROCESS_FIELDS, checkOptionNames, STORE_SUITE_FIELDS } from './option-names.js';
import { checkBatchRoundTrips } from './round-trip-check.js';
import { checkTakeoverStormOptions } from './takeover-storm.js';
import { checkTakeoverStorm } from './takeover-storm-check.js';

/** Options of the conformance checks. */
export interface StoreSuiteOptions {
  /** Name shown in test titles. */
  name: string;
  /**
   * Build a connected store. Called once per check with a unique `prefix` that the store may use to keep
   * its keys apart (a Redis key prefix, say); checks also use unique keys of their own.
   */
  createStore(prefix: string): Promise<Store> | Store;
  /** Dispose of a store built by `createStore` (close the clients it opened). */
  disposeStore?(store: Store): Promise<void> | void;
  /**
   * Run the cross-process claim storm with this configuration. Required for a store shared across
   * processes (`capabilities.crossProcess`): without it a check fails, since the one guarantee such a store
   * exists for would go unchecked; pass `false` to skip the storm knowingly (a suite that only wraps a
   * store already stormed elsewhere).
   */
  crossProcess?: CrossProcessOptions | false;
  /**
   * Whose clock the store judges leases and retentions by: `'backend'`, its backend's (a database
   * server's `NOW()`, Redis `TIME`; the suite then moves the process's clock and checks that nothing
   * follows it), or `'process'`, the clock of the process calling it (only for a backend with no clock
   * that lives on one machine: a SQLite file, memory). Required for a store shared across processes
   * (`capabilities.crossProcess`), whose clocks differ: without it a check fails.
   */
  storeClock?: StoreClock;
  /**
   * How many requests (commands, statements) the stores built by `createStore` have sent to their backend
   * so far: count them in the client you give the store (wrap its `query`, its command sender). With it,
   * a store that declares `capabilities.batch` must send each `claimMany`, `completeMany` and
   * `completeAndClaimMany` of distinct keys as one. Without it that promise goes unchecked: nothing a
   * store returns tells how many requests it sent.
   */
  roundTrips?: () => number | Promise<number>;
  /** Lease used by time-based checks, in ms; raise it for slow stores. @default 250 */
  shortLeaseMs?: number;
  /** Largest outcome round-tripped byte-exact. @default 1 MiB */
  maxOutcomeBytes?: number;
}

/** One named conformance check. */
export interface StoreCheck {
  /** What the check proves, in the test's words. */
  name: string;
  /** Runs the check; rejects when the store violates the contract. */
  run(): Promise<void>;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function assertInProgress(record: IdempotencyRecord | undefined, message: string) {
  assert.ok(record, `${message}: expected a record`);
  assert.equal(record.status, 'in_progress', message);
  return record as Extract<IdempotencyRecord, { status: 'in_progress' }>;
}

function assertCompleted(record: IdempotencyRecord | undefined, message: string) {
  assert.ok(record, `${message}: expected a record`);
  assert.equal(record.status, 'completed', message);
  return record as Extract<IdempotencyRecord, { status: 'completed' }>;
}

function assertBytesEqual(actual: Uint8Array, expected: Uint8Array, message: string) {
  assert.equal(actual.byteLength, expected.byteLength, `${message}: length`);
  assert.ok(Buffer.from(actual).equals(Buffer.from(expected)), `${message}: bytes differ`);
}

/** Build the list of conformance checks for a store. */
export function storeConformanceChecks(options: StoreSuiteOptions): StoreCheck[] {
  checkOptionNames(options, 'storeConformanceChecks', STORE_SUITE_FIELDS);
  if (options.crossProcess) {
    checkOptionNames(
      options.crossProcess,
      'storeConformanceChecks: crossProcess',
      CROSS_PROCESS_FIELDS,
    );
  }
  const { storeClock } = options;
  // Anything but 'process' would otherwise run as 'backend': a typo must not pick the check silently.
  if (storeClock !== undefined && storeClock !== 'backend' && storeClock !== 'process') {
    throw new InvalidOptionsError(
      `storeClock must be 'backend' or 'process', got ${JSON.stringify(storeClock)}`,
    );
  }
  if (options.roundTrips !== undefined && typeof options.roundTrips !== 'function') {
    throw new InvalidOptionsError(
      `roundTrips must be a function returning the requests sent so far, got ${typeof options.roundTrips}`,
    );
  }
  const takeovers = options.crossProcess ? options.crossProcess.takeovers : undefined;
  if (takeovers !== undefined && takeovers !== false) checkTakeoverStormOptions(takeovers);
  const lease = options.shortLeaseMs ?? 250;
  const maxBytes = options.maxOutcomeBytes ?? 1024 * 1024;
  const day = 86_400_000;

  // Every check gets its own store and its own keys, and always disposes of the store.
  function check(
    name: string,
    body: (store: Store, key: (label?: string) => string, prefix: string) => Promise<void>,
  ) {
    return {
      name,
      async run() {
        const prefix = `conf:${process.pid}:${randomUUID().slice(0, 8)}:`;
        const store = await options.createStore(prefix);
        const key = (label = 'k') => `${prefix}${label}:${randomUUID()}`;
        try {
          await body(store, key, prefix);
        } finally {
          await options.disposeStore?.(store);
        }
      },
    } satisfies StoreCheck;
  }

  const checks: StoreCheck[] = [
    check(
      'claims an absent key with a positive integer token and attempt 1',
      async (store, key) => {
        const k = key();
        const result = await store.claim(k, { fingerprint: 'fp-a', leaseMs: 60_000 });
        assert.ok(result.claimed, 'first claim must win');
        assert.ok(
          Number.isSafeInteger(result.token) && result.token > 0,
          'token is a positive integer',
        );
        assert.equal(result.attempt, 1);
        const record = assertInProgress(await store.get(k), 'get after claim');
        assert.equal(record.token, result.token);
        assert.equal(record.fingerprint, 'fp-a');
        assert.equal(record.attempt, 1);
      },
    ),

    check(
      'returns the live in-progress record, with its fingerprint, to a second claim',
      async (store, key) => {
        const k = key();
        const first = await store.claim(k, { fingerprint: 'fp-a', leaseMs: 60_000 });
        assert.ok(first.claimed, 'a claim of a free key wins (first)');
        const second = await store.claim(k, { fingerprint: 'fp-other', leaseMs: 60_000 });
        assert.equal(second.claimed, false, 'a live claim must not be taken');
        if (second.claimed) return;
        const record = assertInProgress(second.record, 'blocking record');
        // The first fingerprint is visible while in flight, so a mismatch is reported, not a conflict.
        assert.equal(record.fingerprint, 'fp-a');
        assert.equal(record.token, first.token);
        assert.ok(record.leaseUntil > Date.now() + 30_000, 'leaseUntil is in the future');
      },
    ),

    check('gives exactly one winner among 50 concurrent claims on one key', async (store, key) => {
      const k = key();
      const results = await Promise.all(
        Array.from({ length: 50 }, () => store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 })),
      );
      assert.equal(results.filter((r) => r.claimed).length, 1, 'exactly one winner');
    }),

    check(
      'gives exactly one winner per key among interleaved concurrent claims',
      async (store, key) => {
        const keys = Array.from({ length: 20 }, (_, i) => key(`multi${i}`));
        const attempts = keys.flatMap((k) => Array.from({ length: 10 }, () => k));
        const results = await Promise.all(
          attempts.map(async (k) => ({
            k,
            r: await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 }),
          })),
        );
        for (const k of keys) {
          const wins = results.filter((x) => x.k === k && x.r.claimed).length;
          assert.equal(wins, 1, `exactly one winner for ${k}`);
        }
      },
    ),

    // The claim of an absent key and the takeover of a dead record are often two code paths (an INSERT
    // that conflicts, and an UPDATE of the dead row): the race of the second is the one left unchecked.
    check(
      'gives exactly one winner among concurrent takeovers of an expired lease or outcome',
      async (store, key) => {
        const dead = key('dead');
        const expired = key('expired');
        const crashed = await store.claim(dead, { fingerprint: 'fp', leaseMs: lease });
        const done = await store.claim(expired, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(crashed.claimed && done.claimed, 'a claim of a free key wins (crashed, done)');
        assert.equal(await store.complete(expired, done.token, Buffer.from('x'), lease), true);
        await sleep(lease + 150);
        for (const [k, what] of [
          [dead, 'an expired lease'],
          [expired, 'an expired outcome'],
        ] as const) {
          const results = await Promise.all(
            Array.from({ length: 20 }, () =>
              store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 }),
            ),
          );
          assert.equal(
            results.filter((r) => r.claimed).length,
            1,
            `exactly one winner among 20 concurrent takeovers of ${what}: take a dead record over ` +
              'as atomically as an absent key (one statement or script), never by reading it and then writing',
          );
        }
      },
    ),

    check(
      'completes the holder’s claim and replays the outcome to later claims',
      async (store, key) => {
        const k = key();
        const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
        const outcome = Buffer.from('{"ok":true}');
        assert.equal(await store.complete(k, claim.token, outcome, day), true);
        const record = assertCompleted(await store.get(k), 'get after complete');
        assertBytesEqual(record.outcome, outcome, 'stored outcome');
        assert.equal(record.fingerprint, 'fp');
        assert.equal(record.token, claim.token);
        assert.ok(record.expiresAt > Date.now() + day / 2, 'expiresAt reflects retention');
        const again = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.equal(again.claimed, false, 'a completed record is never claimed');
        if (!again.claimed)
          assertBytesEqual(assertCompleted(again.record, 'claim').outcome, outcome, 'claim');
      },
    ),

    check(
      'treats a repeated complete by the same token as success and changes nothing',
      async (store, key) => {
        const k = key();
        const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
        assert.equal(await store.complete(k, claim.token, Buffer.from('one'), day), true);
        assert.equal(
          await store.complete(k, claim.token, Buffer.from('two'), day),
          true,
          'a resend of complete by the token that completed must report success (a SQL UPDATE that ' +
            'changes nothing must still count the row it matched: CLIENT_FOUND_ROWS on MySQL and MariaDB)',
        );
        const record = assertCompleted(await store.get(k), 'after resend');
        assertBytesEqual(record.outcome, Buffer.from('one'), 'first outcome kept');
      },
    ),

    check('fences out complete, extend and release with a wrong token', async (store, key) => {
      const k = key();
      const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
      const wrong = claim.token + 1;
      assert.equal(await store.complete(k, wrong, Buffer.from('x'), day), false, 'complete');
      assert.equal(await store.extend(k, wrong, 60_000), false, 'extend');
      assert.equal(await store.release(k, wrong), false, 'release');
      const record = assertInProgress(await store.get(k), 'record untouched');
      assert.equal(record.token, claim.token);
    }),

    check(
      'refuses invalid durations as the caller’s mistake, writing nothing',
      async (store, key) => {
        const k = key();
        /** `call` must reject with an InvalidOptionsError (not a store outage, not a result). */
        async function refused(what: string, call: () => Promise<unknown>) {
          let error: unknown;
          try {
            await call();
          } catch (caught) {
            error = caught;
          }
          assert.ok(error !== undefined, `${what}: must reject`);
          assert.ok(
            isInvalidOptionsError(error),
            `${what}: must reject with an InvalidOptionsError, got ${String(error)}`,
          );
        }
        // 1e300 is finite but past any backend's range of times: refused up front, not failed inside.
        const badPositive = [
          0,
          -1,
          Number.NaN,
          Number.POSITIVE_INFINITY,
          1e300,
          '100' as unknown as number,
        ];
        const badReserve = [-1, Number.NaN, Number.POSITIVE_INFINITY, 1e300];
        for (const leaseMs of badPositive) {
          await refused(`claim, leaseMs ${String(leaseMs)}`, () =>
            store.claim(k, { fingerprint: 'fp', leaseMs }),
          );
        }
        for (const reserveMs of badReserve) {
          await refused(`claim, reserveMs ${reserveMs}`, () =>
            store.claim(k, { fingerprint: 'fp', leaseMs: 60_000, reserveMs }),
          );
        }
        assert.equal(await store.get(k), undefined, 'no refused claim wrote a record');
        if (store.capabilities.batch && store.claimMany && store.completeMany) {
          // A batch is refused whole: its valid item is not claimed either.
          const other = key('batch');
          await refused('claimMany with one invalid item', () =>
            store.claimMany!([
              { key: other, fingerprint: 'fp', leaseMs: 60_000 },
              { key: k, fingerprint: 'fp', leaseMs: -1 },
            ]),
          );
          assert.equal(await store.get(other), undefined, 'no item of a refused batch claimed');
        }

        const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(claim.claimed, 'a valid claim still wins');
        for (const value of badPositive) {
          await refused(`extend, leaseMs ${String(value)}`, () =>
            store.extend(k, claim.token, value),
          );
          await refused(`complete, retentionMs ${String(value)}`, () =>
            store.complete(k, claim.token, Buffer.from('x'), value),
          );
        }
        if (store.capabilities.batch && store.completeMany) {
          await refused('completeMany with an invalid retention', () =>
            store.completeMany!([
              { key: k, token: claim.token, outcome: Buffer.from('x'), retentionMs: 0 },
            ]),
          );
        }
        const record = assertInProgress(await store.get(k), 'the claim is untouched');
        assert.equal(record.token, claim.token);
        assert.equal(await store.complete(k, claim.token, Buffer.from('ok'), day), true);
      },
    ),

    check(
      'takes over an expired lease with a larger token and fences the stale holder',
      async (store, key) => {
        const k = key();
        const stale = await store.claim(k, { fingerprint: 'fp', leaseMs: lease });
        assert.ok(stale.claimed, 'a claim of a free key wins (stale)');
        await sleep(lease + 150);
        const fresh = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(fresh.claimed, 'expired lease must be taken over');
        assert.ok(fresh.token > stale.token, 'token grows on takeover');
        assert.ok(fresh.attempt >= 1, 'a takeover’s attempt is a positive number');
        assert.equal(
          await store.complete(k, stale.token, Buffer.from('stale'), day),
          false,
          'stale complete',
        );
        assert.equal(await store.extend(k, stale.token, 60_000), false, 'stale extend');
        assert.equal(await store.release(k, stale.token), false, 'stale release');
        const record = assertInProgress(await store.get(k), 'newer attempt intact');
        assert.equal(record.token, fresh.token);
        assert.equal(await store.complete(k, fresh.token, Buffer.from('fresh'), day), true);
        assertBytesEqual(
          assertCompleted(await store.get(k), 'done').outcome,
          Buffer.from('fresh'),
          'out',
        );
      },
    ),

    check('counts takeovers in attempt while the record survives', async (store, key) => {
      const k = key();
      const first = await store.claim(k, { fingerprint: 'fp', leaseMs: lease });
      assert.ok(first.claimed, 'a claim of a free key wins (first)');
      await sleep(lease + 150);
      const second = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(second.claimed, 'a claim of a free key wins (second)');
      // A store that keeps dead leases reports attempt 2; one whose lease keys vanish (Redis) starts at 1.
      assert.ok(second.attempt === 2 || second.attempt === 1, `attempt was ${second.attempt}`);
      assert.equal(assertInProgress(await store.get(k), 'record').attempt, second.attempt);
    }),

    check(
      'refuses completion by a holder whose lease expired, even without a takeover',
      async (store, key) => {
        const k = key();
        const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: lease });
        assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
        await sleep(lease + 150);
        assert.equal(
          await store.complete(k, claim.token, Buffer.from('late'), day),
          false,
          'complete of an expired lease (compare the lease with the store’s now, not only the token)',
        );
        assert.equal(await store.get(k), undefined, 'an expired lease is not a live record');
      },
    ),

    // The same rule on every other write path of a holder: a store with two code paths (one per call and
    // one per batch, say) easily checks the lease on one and only the token on the other.
    check(
      'refuses extend, release and batched completions by a holder whose lease expired, even without a takeover',
      async (store, key) => {
        const paths = ['extend', 'release', 'completeMany', 'completeAndClaimMany'] as const;
        const held = new Map<string, { key: string; token: number }>();
        for (const path of paths) {
          const k = key(path);
          const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: lease });
          assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
          held.set(path, { key: k, token: claim.token });
        }
        const k = (path: (typeof paths)[number]) => held.get(path)!;
        await sleep(lease + 150);

        const extended = k('extend');
        assert.equal(
          await store.extend(extended.key, extended.token, 60_000),
          false,
          'extend of an expired lease',
        );
        assert.equal(await store.get(extended.key), undefined, 'the expired lease stays dead');
        const next = await store.claim(extended.key, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(next.claimed, 'a new attempt takes the key whose holder failed to extend');

        const released = k('release');
        assert.equal(
          await store.release(released.key, released.token),
          false,
          'release of an expired lease',
        );

        const outcome = { outcome: Buffer.from('late'), retentionMs: day };
        if (store.capabilities.batch && store.completeMany) {
          const late = k('completeMany');
          assert.deepEqual(
            await store.completeMany([{ ...late, ...outcome }]),
            [false],
            'completeMany of an expired lease',
          );
          assert.equal(await store.get(late.key), undefined, 'completeMany stored no outcome');
        }
        if (store.completeAndClaimMany) {
          const late = k('completeAndClaimMany');
          const { completed } = await store.completeAndClaimMany([{ ...late, ...outcome }], []);
          assert.deepEqual(completed, [false], 'completeAndClaimMany of an expired lease');
          assert.equal(
            await store.get(late.key),
            undefined,
            'completeAndClaimMany stored no outcome',
          );
        }
      },
    ),

    check('extends a held lease so that it outlives its first expiry', async (store, key) => {
      const k = key();
      const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: lease });
      assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
      await sleep(lease / 2);
      assert.equal(await store.extend(k, claim.token, lease * 4), true);
      await sleep(lease);
      const other = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.equal(other.claimed, false, 'extended lease still holds');
      assert.equal(await store.complete(k, claim.token, Buffer.from('ok'), day), true);
    }),

    check(
      'releases the holder’s claim so the next claim wins with a larger token',
      async (store, key) => {
        const k = key();
        const first = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(first.claimed, 'a claim of a free key wins (first)');
        assert.equal(await store.release(k, first.token), true);
        assert.equal(await store.get(k), undefined);
        const second = await store.claim(k, { fingerprint: 'fp2', leaseMs: 60_000 });
        assert.ok(second.claimed, 'released key can be claimed again');
        assert.ok(second.token > first.token, 'a zombie of the first claim can never match');
        assert.equal(
          await store.complete(k, first.token, Buffer.from('zombie'), day),
          false,
          'complete by the released claim’s token',
        );
      },
    ),

    check('never releases or extends a completed record', async (store, key) => {
      const k = key();
      const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
      assert.equal(await store.complete(k, claim.token, Buffer.from('done'), day), true);
      assert.equal(await store.release(k, claim.token), false, 'release');
      assert.equal(await store.extend(k, claim.token, 60_000), false, 'extend');
      assertCompleted(await store.get(k), 'still completed');
    }),

    check('forgets a completed record after its retention', async (store, key) => {
      const k = key();
      const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
      assert.equal(await store.complete(k, claim.token, Buffer.from('short'), lease), true);
      assertCompleted(await store.get(k), 'before expiry');
      await sleep(lease + 150);
      assert.equal(await store.get(k), undefined, 'expired record is gone');
      const again = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(again.claimed, 'the key is new again');
      assert.ok(
        again.token > claim.token,
        'the key is new again: its claim gets a larger token than the expired outcome’s',
      );
    }),

    check(`round-trips binary outcomes byte-exact up to ${maxBytes} bytes`, async (store, key) => {
      const everyByte = Uint8Array.from({ length: 256 }, (_, i) => i);
      const samples = [
        new Uint8Array(0),
        Uint8Array.of(0),
        everyByte,
        randomBytes(65_536),
        randomBytes(maxBytes),
      ];
      for (const [i, outcome] of samples.entries()) {
        const k = key(`bin${i}`);
        const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
        assert.equal(await store.complete(k, claim.token, outcome, day), true);
        assertBytesEqual(assertCompleted(await store.get(k), 'get').outcome, outcome, `get #${i}`);
        const replay = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.equal(replay.claimed, false);
        if (!replay.claimed) {
          assertBytesEqual(assertCompleted(replay.record, 'claim').outcome, outcome, `claim #${i}`);
        }
      }
    }),

    check('deletes records of any status on request', async (store, key) => {
      const live = key('live');
      const done = key('done');
      const a = await store.claim(live, { fingerprint: 'fp', leaseMs: 60_000 });
      const b = await store.claim(done, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(a.claimed && b.claimed, 'a claim of a free key wins (a, b)');
      assert.equal(await store.complete(done, b.token, Buffer.from('x'), day), true);
      assert.equal(await store.delete(live), true);
      assert.equal(await store.delete(done), true);
      assert.equal(await store.get(live), undefined);
      assert.equal(await store.get(done), undefined);
      assert.equal(await store.delete(key('absent')), false);
    }),

    // Measured on every built-in store: `delete` reports only a live record (what `get` returns), and
    // removes a dead one all the same, reservation included; the next claim still gets a larger token.
    check(
      'deletes a dead record (expired lease, reserved or not, or expired outcome), reporting false, and frees its key',
      async (store, key) => {
        const [unreserved, reserved, expired] = [
          key('unreserved'),
          key('reserved'),
          key('expired'),
        ];
        const a = await store.claim(unreserved, { fingerprint: 'fp', leaseMs: lease });
        const b = await store.claim(reserved, {
          fingerprint: 'fp',
          leaseMs: lease,
          reserveMs: day,
        });
        const c = await store.claim(expired, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(a.claimed && b.claimed && c.claimed, 'a claim of a free key wins (a, b, c)');
        assert.equal(await store.complete(expired, c.token, Buffer.from('x'), lease), true);
        await sleep(lease + 150);
        for (const [k, token, what] of [
          [unreserved, a.token, 'an expired lease'],
          [reserved, b.token, 'an expired lease still reserved for its request'],
          [expired, c.token, 'an expired outcome'],
        ] as const) {
          assert.equal(
            await store.delete(k),
            false,
            `delete of ${what} returns false: it reports a live record only, one \`get\` would return`,
          );
          if (store.inspect) {
            assert.equal(await store.inspect(k), undefined, `delete removed ${what}`);
          }
          const next = await store.claim(k, { fingerprint: 'fp-other', leaseMs: 60_000 });
          assert.ok(
            next.claimed,
            `after the delete of ${what}, another request's claim wins: delete removes a dead record ` +
              'too, and with it the reservation',
          );
          assert.ok(next.token > token, `after the delete of ${what}, the next token is larger`);
        }
      },
    ),

    check('reports live, completed and stale records in stats', async (store, key) => {
      const started = Date.now();
      const before = await store.stats();
      // A store whose stats walk a large shared keyspace (Redis `SCAN`) takes a while: the lease that is
      // to end before the last call must still be live during the next one.
      const staleLeaseMs = Math.max(lease, 3 * (Date.now() - started) + 100);
      const live = await store.claim(key('live'), { fingerprint: 'fp', leaseMs: 60_000 });
      const stale = await store.claim(key('stale'), { fingerprint: 'fp', leaseMs: staleLeaseMs });
      const doneKey = key('done');
      const done = await store.claim(doneKey, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(
        live.claimed && stale.claimed && done.claimed,
        'a claim of a free key wins (live, stale, done)',
      );
      const mid = await store.stats();
      assert.equal(mid.inProgress - before.inProgress, 3, 'three live leases');
      assert.ok(mid.oldestLeaseAgeMs !== null && mid.oldestLeaseAgeMs >= 0, 'oldest lease age');
      assert.equal(await store.complete(doneKey, done.token, Buffer.from('x'), day), true);
      await sleep(staleLeaseMs + 150);
      const after = await store.stats();
      assert.equal(after.inProgress - before.inProgress, 1, 'one live lease left');
      assert.equal(after.completed - before.completed, 1, 'one completed');
      // A store that keeps dead leases counts it as stale; one whose lease keys vanish (Redis) cannot.
      const staleDelta = after.staleLeases - before.staleLeases;
      assert.ok(staleDelta === 0 || staleDelta === 1, `stale leases grew by ${staleDelta}`);
    }),
  ];

  checks.push(
    check(
      'keeps a crashed claim’s key reserved for its fingerprint: the same request takes it over',
      async (store, key) => {
        const k = key();
        const crashed = await store.claim(k, {
          fingerprint: 'fp-a',
          leaseMs: lease,
          reserveMs: day,
        });
        assert.ok(crashed.claimed, 'a claim of a free key wins (crashed)');
        await sleep(lease + 150);
        const other = await store.claim(k, {
          fingerprint: 'fp-b',
          leaseMs: 60_000,
          reserveMs: day,
        });
        assert.equal(other.claimed, false, 'another fingerprint must not take a reserved key');
        if (!other.claimed) {
          const record = assertInProgress(other.record, 'the reserved record is returned');
          assert.equal(record.fingerprint, 'fp-a', 'with the crashed claim’s fingerprint');
          assert.equal(record.token, crashed.token);
        }
        assert.equal(await store.get(k), undefined, 'a dead lease is still not a live record');
        assert.equal(
          await store.complete(k, crashed.token, Buffer.from('late'), day),
          false,
          'the crashed holder stays fenced out',
        );
        const same = await store.claim(k, { fingerprint: 'fp-a', leaseMs: 60_000, reserveMs: day });
        assert.ok(same.claimed, 'the same fingerprint takes the key over');
        assert.ok(same.token > crashed.token, 'token grows on takeover');
        assert.equal(same.attempt, 2, 'the reserved record counts the takeover');
        assert.equal(await store.complete(k, same.token, Buffer.from('done'), day), true);
      },
    ),
    check(
      'frees a crashed claim’s key for any request once its reservation ends',
      async (store, key) => {
        const k = key();
        const crashed = await store.claim(k, {
          fingerprint: 'fp-a',
          leaseMs: lease,
          reserveMs: lease * 2,
        });
        assert.ok(crashed.claimed, 'a claim of a free key wins (crashed)');
        await sleep(lease * 2 + 150);
        const other = await store.claim(k, { fingerprint: 'fp-b', leaseMs: 60_000 });
        assert.ok(other.claimed, 'an ended reservation blocks nothing');
        assert.ok(other.token > crashed.token, 'token grows');
        const unreserved = key('unreserved');
        assert.ok((await store.claim(unreserved, { fingerprint: 'fp-a', leaseMs: lease })).claimed);
        await sleep(lease + 150);
        const next = await store.claim(unreserved, { fingerprint: 'fp-b', leaseMs: 60_000 });
        assert.ok(next.claimed, 'without reserveMs the key is free once the lease ends');
      },
    ),
    check(
      'keeps the reservation through extensions and drops it on release',
      async (store, key) => {
        const k = key();
        const claim = await store.claim(k, { fingerprint: 'fp-a', leaseMs: lease, reserveMs: day });
        assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
        assert.equal(await store.extend(k, claim.token, lease), true, 'extend');
        await sleep(lease + 150);
        const other = await store.claim(k, { fingerprint: 'fp-b', leaseMs: 60_000 });
        assert.equal(other.claimed, false, 'an extension must not shorten the reservation');
        const released = key('released');
        const held = await store.claim(released, {
          fingerprint: 'fp-a',
          leaseMs: 60_000,
          reserveMs: day,
        });
        assert.ok(held.claimed, 'a claim of a free key wins (held)');
        assert.equal(await store.release(released, held.token), true, 'release');
        const next = await store.claim(released, { fingerprint: 'fp-b', leaseMs: 60_000 });
        assert.ok(next.claimed, 'a released key is free to any request');
      },
    ),
    check('never purges a dead lease that is still reserved', async (store, key) => {
      const k = key();
      const crashed = await store.claim(k, { fingerprint: 'fp-a', leaseMs: 50, reserveMs: day });
      assert.ok(crashed.claimed, 'a claim of a free key wins (crashed)');
      await sleep(200);
      if (store.purgeExpired !== undefined && store.capabilities.purge) {
        while ((await store.purgeExpired({ limit: 1000 })) > 0) {}
      }
      const other = await store.claim(k, { fingerprint: 'fp-b', leaseMs: 60_000 });
      assert.equal(other.claimed, false, 'the reservation survives a purge');
      const stats = await store.stats();
      assert.ok(stats.staleLeases >= 1, 'a reserved dead lease is a stale lease in stats');
    }),
  );

  checks.push(
    check(
      'inspect shows live and completed records, and a crashed claim while it is reserved',
      async (store, key) => {
        if (store.inspect === undefined) return;
        const skew = 60_000;
        const steps = store.capabilities.steps && store.saveStep !== undefined;
        assert.equal(await store.inspect(key('absent')), undefined, 'an absent key');

        const crashed = key('crashed');
        const unreserved = key('unreserved');
        const released = key('released');
        const done = key('done');
        const a = await store.claim(crashed, {
          fingerprint: 'fp-a',
          leaseMs: lease,
          reserveMs: day,
        });
        const b = await store.claim(unreserved, { fingerprint: 'fp-b', leaseMs: lease });
        const c = await store.claim(released, {
          fingerprint: 'fp-c',
          leaseMs: lease,
          reserveMs: day,
        });
        const d = await store.claim(done, { fingerprint: 'fp-d', leaseMs: 60_000 });
        assert.ok(
          a.claimed && b.claimed && c.claimed && d.claimed,
          'a claim of a free key wins (a, b, c, d)',
        );
        if (steps)
          assert.equal(
            await store.saveStep?.(crashed, a.token, 'charge', Buffer.from('ch_1')),
            true,
          );
        assert.equal(await store.release(released, c.token), true);
        assert.equal(await store.complete(done, d.token, Buffer.from('outcome'), day), true);

        const live = await store.inspect(crashed);
        assert.ok(live, 'a live claim');
        assert.ok(Math.abs(live.now - Date.now()) < skew, 'now is the store clock, in epoch ms');
        const held = assertInProgress(live.record, 'a live claim');
        assert.equal(held.token, a.token);
        assert.equal(held.fingerprint, 'fp-a');
        assert.ok(held.leaseUntil > live.now, 'its lease is live');
        assert.ok(
          (held.reservedUntil ?? 0) > held.leaseUntil,
          'its reservation reaches past its lease',
        );
        if (steps)
          assertBytesEqual(held.steps?.charge ?? new Uint8Array(), Buffer.from('ch_1'), 'its step');

        const completed = await store.inspect(done);
        assert.ok(completed, 'a completed record');
        assertBytesEqual(
          assertCompleted(completed.record, 'completed').outcome,
          Buffer.from('outcome'),
          'outcome',
        );
        assert.equal(await store.inspect(released), undefined, 'a release leaves nothing reserved');

        await sleep(lease + 150);
        assert.equal(await store.get(crashed), undefined, 'get hides the dead lease');
        const dead = await store.inspect(crashed);
        assert.ok(dead, 'inspect shows the dead lease while it is reserved');
        const record = assertInProgress(dead.record, 'the crashed claim');
        assert.equal(record.token, a.token);
        assert.ok(record.leaseUntil <= dead.now, 'its lease has ended');
        assert.ok((record.reservedUntil ?? 0) > dead.now, 'its reservation has not');
        if (steps) {
          assertBytesEqual(
            record.steps?.charge ?? new Uint8Array(),
            Buffer.from('ch_1'),
            'its step kept',
          );
        }
        assert.equal(
          await store.inspect(unreserved),
          undefined,
          'a dead, unreserved lease is gone',
        );
        // Inspecting changed nothing: the same request still takes the key over, another is refused.
        assert.equal(
          (await store.claim(crashed, { fingerprint: 'fp-b', leaseMs: 60_000 })).claimed,
          false,
        );
        const takeover = await store.claim(crashed, { fingerprint: 'fp-a', leaseMs: 60_000 });
        assert.ok(
          takeover.claimed && takeover.token > a.token,
          'the same request takes the crashed claim over, with a larger token',
        );
      },
    ),
  );

  checks.push(
    check(
      'follows the store’s clock, never the process’s (leases, retentions, tokens after a release)',
      (store, key) =>
        checkStoreClock(store, { name: options.name, storeClock: options.storeClock, key, lease }),
    ),
    check(
      'answers a losing claim with the record as it stands, never an earlier read',
      (store, key) => checkLosingClaim(store, { key, lease }),
    ),
  );

  checks.push(
    check(
      'listCrashed lists each crashed claim once across pages, and never a live lease, a completed record, an ended reservation or another prefix’s key',
      (store, key, prefix) =>
        checkListCrashed(store, {
          key,
          prefix,
          lease,
          createOtherStore: (otherPrefix) => options.createStore(otherPrefix),
          disposeOtherStore: (other) => options.disposeStore?.(other),
        }),
    ),
  );

  checks.push(
    check(
      'purges expired records in bounded batches and never a live lease',
      async (store, key) => {
        if (store.purgeExpired === undefined || !store.capabilities.purge) {
          assert.equal(
            store.capabilities.purge,
            false,
            'purgeExpired missing but capability claimed',
          );
          return;
        }
        const liveLease = key('live');
        const liveDone = key('done');
        const held = await store.claim(liveLease, { fingerprint: 'fp', leaseMs: 60_000 });
        const doneClaim = await store.claim(liveDone, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(
          held.claimed && doneClaim.claimed,
          'a claim of a free key wins (held, doneClaim)',
        );
        await store.complete(liveDone, doneClaim.token, Buffer.from('keep'), day);
        for (let i = 0; i < 5; i++) {
          const expiring = key(`exp${i}`);
          const c = await store.claim(expiring, { fingerprint: 'fp', leaseMs: 60_000 });
          assert.ok(c.claimed, 'a claim of a free key wins (c)');
          await store.complete(expiring, c.token, Buffer.from('old'), 50);
          await store.claim(key(`dead${i}`), { fingerprint: 'fp', leaseMs: 50 });
        }
        await sleep(200);
        const first = await store.purgeExpired({ limit: 2 });
        assert.ok(first <= 2, `limit respected (deleted ${first})`);
        let total = first;
        for (
          let n = await store.purgeExpired({ limit: 1000 });
          n > 0;
          n = await store.purgeExpired({ limit: 1000 })
        ) {
          total += n;
        }
        assert.ok(total >= 10, `expired records purged (deleted ${total})`);
        // The live lease is still held by its token, and the live outcome is still replayable.
        assertInProgress(await store.get(liveLease), 'live lease kept');
        assert.equal(await store.extend(liveLease, held.token, 60_000), true, 'holder still holds');
        assertCompleted(await store.get(liveDone), 'live outcome kept');
      },
    ),
  );

  checks.push(
    check('claims a batch exactly as sequential claims would', async (store, key) => {
      if (!store.capabilities.batch) return;
      assert.ok(
        store.claimMany && store.completeMany,
        'capabilities.batch needs claimMany and completeMany',
      );
      const [a, b, live] = [key('a'), key('b'), key('live')];
      const held = await store.claim(live, { fingerprint: 'fp-live', leaseMs: 60_000 });
      assert.ok(held.claimed, 'a claim of a free key wins (held)');
      const results = await store.claimMany([
        { key: a, fingerprint: 'fp-a', leaseMs: 60_000 },
        { key: b, fingerprint: 'fp-b', leaseMs: 60_000 },
        { key: a, fingerprint: 'fp-other', leaseMs: 60_000 },
        { key: live, fingerprint: 'fp-x', leaseMs: 60_000 },
      ]);
      assert.equal(results.length, 4, 'one result per item, in order');
      const [ra, rb, ra2, rlive] = results;
      assert.ok(ra?.claimed && rb?.claimed, 'absent keys are claimed');
      assert.ok(ra2 && !ra2.claimed, 'the repeated key sees the first item of the batch');
      if (ra2 && !ra2.claimed) {
        assert.equal(assertInProgress(ra2.record, 'repeat').fingerprint, 'fp-a');
        assert.equal(ra2.record.token, ra.token);
      }
      assert.ok(rlive && !rlive.claimed, 'a live claim is not taken');
      if (rlive && !rlive.claimed) assert.equal(rlive.record.token, held.token);
      assert.equal(assertInProgress(await store.get(b), 'b').token, rb.token);
    }),
  );

  const { roundTrips } = options;
  if (roundTrips !== undefined) {
    checks.push(
      check('sends each batch call as one round trip (capabilities.batch)', (store, key) =>
        checkBatchRoundTrips(store, { key, roundTrips }),
      ),
    );
  }

  checks.push(
    check('gives exactly one winner per key among concurrent batches', async (store, key) => {
      if (!store.capabilities.batch || !store.claimMany) return;
      const keys = Array.from({ length: 30 }, (_, i) => key(`batch${i}`));
      const batches = Array.from({ length: 8 }, (_, b) =>
        keys.map((_, i) => keys[(i * 7 + b * 11) % keys.length]!),
      );
      const results = await Promise.all(
        batches.map((batch) =>
          store.claimMany!(batch.map((k) => ({ key: k, fingerprint: 'fp', leaseMs: 60_000 }))),
        ),
      );
      const wins = new Map<string, number>();
      for (const [b, batch] of batches.entries()) {
        for (const [i, k] of batch.entries()) {
          if (results[b]?.[i]?.claimed) wins.set(k, (wins.get(k) ?? 0) + 1);
        }
      }
      for (const k of keys) assert.equal(wins.get(k), 1, `exactly one winner for ${k}`);
    }),
  );

  checks.push(
    check('completes a batch with per-item fencing', async (store, key) => {
      if (!store.capabilities.batch || !store.completeMany) return;
      const [a, b, c] = [key('a'), key('b'), key('c')];
      const ca = await store.claim(a, { fingerprint: 'fp', leaseMs: 60_000 });
      const cb = await store.claim(b, { fingerprint: 'fp', leaseMs: 60_000 });
      const cc = await store.claim(c, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(ca.claimed && cb.claimed && cc.claimed, 'a claim of a free key wins (ca, cb, cc)');
      assert.equal(await store.complete(c, cc.token, Buffer.from('c1'), day), true);
      const results = await store.completeMany([
        { key: a, token: ca.token, outcome: Buffer.from('a1'), retentionMs: day },
        { key: b, token: cb.token + 1, outcome: Buffer.from('wrong'), retentionMs: day },
        { key: c, token: cc.token, outcome: Buffer.from('c2'), retentionMs: day },
        { key: key('absent'), token: 1, outcome: Buffer.from('x'), retentionMs: day },
        { key: a, token: ca.token, outcome: Buffer.from('a2'), retentionMs: day },
      ]);
      assert.deepEqual(
        results,
        [true, false, true, false, true],
        'completeMany per item: the holder, a wrong token, a resend after success, an absent key, a ' +
          'resend within the batch',
      );
      assertBytesEqual(
        assertCompleted(await store.get(a), 'a').outcome,
        Buffer.from('a1'),
        'a kept its first outcome',
      );
      assert.equal(assertInProgress(await store.get(b), 'b').token, cb.token, 'b untouched');
      assertBytesEqual(
        assertCompleted(await store.get(c), 'c').outcome,
        Buffer.from('c1'),
        'c kept its outcome',
      );
    }),
  );

  checks.push(
    check('completes, then claims, in one call as separate calls would', async (store, key) => {
      if (!store.completeAndClaimMany) return;
      const [done, fenced, fresh, live] = [key('done'), key('fenced'), key('fresh'), key('live')];
      const cd = await store.claim(done, { fingerprint: 'fp-done', leaseMs: 60_000 });
      const cf = await store.claim(fenced, { fingerprint: 'fp', leaseMs: 60_000 });
      const cl = await store.claim(live, { fingerprint: 'fp-live', leaseMs: 60_000 });
      assert.ok(cd.claimed && cf.claimed && cl.claimed, 'a claim of a free key wins (cd, cf, cl)');
      const { completed, claimed } = await store.completeAndClaimMany(
        [
          { key: done, token: cd.token, outcome: Buffer.from('done'), retentionMs: day },
          { key: fenced, token: cf.token + 1, outcome: Buffer.from('wrong'), retentionMs: day },
        ],
        [
          { key: done, fingerprint: 'fp-done', leaseMs: 60_000 },
          { key: fresh, fingerprint: 'fp-fresh', leaseMs: 60_000 },
          { key: live, fingerprint: 'fp-other', leaseMs: 60_000 },
          { key: fresh, fingerprint: 'fp-again', leaseMs: 60_000 },
        ],
      );
      assert.deepEqual(completed, [true, false], 'each completion fenced by its own token');
      assert.equal(claimed.length, 4, 'one claim result per item, in order');
      const [rdone, rfresh, rlive, rfresh2] = claimed;
      assert.ok(rdone && !rdone.claimed, 'a key completed by the same call is not claimed');
      if (rdone && !rdone.claimed) {
        assertBytesEqual(
          assertCompleted(rdone.record, 'done').outcome,
          Buffer.from('done'),
          'the claim sees the outcome the same call stored',
        );
      }
      assert.ok(rfresh?.claimed, 'an absent key is claimed');
      assert.ok(rlive && !rlive.claimed, 'a live claim is not taken');
      if (rlive && !rlive.claimed) assert.equal(rlive.record.token, cl.token);
      assert.ok(rfresh2 && !rfresh2.claimed, 'a repeated key sees the earlier item of the call');
      if (rfresh2 && !rfresh2.claimed && rfresh?.claimed) {
        assert.equal(assertInProgress(rfresh2.record, 'fresh').token, rfresh.token);
      }
      assert.equal(
        assertInProgress(await store.get(fenced), 'fenced').token,
        cf.token,
        'a fenced-out completion changes nothing',
      );
      // Either list may be empty.
      const onlyCompletes = await store.completeAndClaimMany(
        [{ key: fenced, token: cf.token, outcome: Buffer.from('late'), retentionMs: day }],
        [],
      );
      assert.deepEqual(onlyCompletes, { completed: [true], claimed: [] });
      const onlyClaims = await store.completeAndClaimMany(
        [],
        [{ key: key('solo'), fingerprint: 'fp', leaseMs: 60_000 }],
      );
      assert.equal(onlyClaims.completed.length, 0);
      assert.ok(onlyClaims.claimed[0]?.claimed, 'a claim alone is claimed');
    }),
  );

  checks.push(
    check('applies reservations in batches as single claims do', async (store, key) => {
      if (!store.capabilities.batch || !store.claimMany) return;
      const [a, b, c, d] = [key('a'), key('b'), key('c'), key('d')];
      for (const k of [a, b, c, d]) {
        const crashed = await store.claim(k, { fingerprint: 'fp', leaseMs: lease, reserveMs: day });
        assert.ok(crashed.claimed, 'a claim of a free key wins (crashed)');
      }
      await sleep(lease + 150);
      const results = await store.claimMany([
        { key: a, fingerprint: 'fp-other', leaseMs: 60_000, reserveMs: day },
        { key: b, fingerprint: 'fp', leaseMs: lease, reserveMs: day },
      ]);
      const [ra, rb] = results;
      assert.ok(ra && !ra.claimed, 'claimMany: another fingerprint is refused');
      if (ra && !ra.claimed) assert.equal(ra.record.fingerprint, 'fp');
      assert.ok(rb?.claimed, 'claimMany: the same fingerprint takes over');
      assert.equal(rb.attempt, 2);
      // A later item of the batch sees what an earlier item did to the key, not what was stored before.
      const [rd, rd2] = await store.claimMany([
        { key: d, fingerprint: 'fp', leaseMs: 60_000, reserveMs: day },
        { key: d, fingerprint: 'fp-other', leaseMs: 60_000, reserveMs: day },
      ]);
      assert.ok(rd?.claimed, 'claimMany: the same fingerprint takes over first');
      assert.ok(rd2 && !rd2.claimed, 'claimMany: then another fingerprint is refused');
      if (rd2 && !rd2.claimed) {
        assert.equal(rd2.record.token, rd.token, 'by the claim the earlier item made');
      }
      if (!store.completeAndClaimMany) return;
      const both = await store.completeAndClaimMany(
        [],
        [
          { key: c, fingerprint: 'fp-other', leaseMs: 60_000, reserveMs: day },
          { key: c, fingerprint: 'fp', leaseMs: 60_000, reserveMs: day },
        ],
      );
      const [rc, rc2] = both.claimed;
      assert.ok(rc && !rc.claimed, 'completeAndClaimMany: another fingerprint is refused');
      assert.ok(rc2?.claimed, 'completeAndClaimMany: the same fingerprint takes over');
      // The takeover reserved the key again, from now.
      await sleep(lease + 150);
      const later = await store.claimMany([
        { key: b, fingerprint: 'fp-other', leaseMs: 60_000 },
        { key: key('fresh'), fingerprint: 'fp', leaseMs: 60_000 },
      ]);
      assert.ok(later[0] && !later[0].claimed, 'a takeover renews the reservation');
      assert.ok(later[1]?.claimed, 'a claim of a free key wins (fresh)');
    }),
  );

  checks.push(
    check('records steps on the held claim, fenced by its token', async (store, key) => {
      if (!store.capabilities.steps) return;
      assert.ok(
        store.saveStep && store.loadSteps,
        'capabilities.steps needs saveStep and loadSteps',
      );
      const k = key();
      const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000, reserveMs: day });
      assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
      assert.deepEqual(await store.loadSteps(k, claim.token), {}, 'no steps yet');
      const binary = Uint8Array.from({ length: 65_536 }, (_, i) => i % 256);
      assert.equal(await store.saveStep(k, claim.token, 'charge', Buffer.from('one')), true);
      assert.equal(await store.saveStep(k, claim.token, 'ship.v2:eu-1_x', binary), true);
      assert.equal(await store.saveStep(k, claim.token, 'charge', Buffer.from('two')), true);
      const steps = await store.loadSteps(k, claim.token);
      assert.ok(steps, 'the holder loads its steps');
      assert.deepEqual(Object.keys(steps).sort(), ['charge', 'ship.v2:eu-1_x']);
      assertBytesEqual(steps.charge as Uint8Array, Buffer.from('two'), 'a step saved again');
      assertBytesEqual(steps['ship.v2:eu-1_x'] as Uint8Array, binary, 'binary step');
      const wrong = claim.token + 1;
      assert.equal(await store.saveStep(k, wrong, 'charge', Buffer.from('x')), false, 'save');
      assert.equal(await store.loadSteps(k, wrong), undefined, 'load with a wrong token');
      assert.equal(await store.complete(k, claim.token, Buffer.from('done'), day), true);
      assert.equal(
        await store.saveStep(k, claim.token, 'late', Buffer.from('x')),
        false,
        'a completed record takes no steps',
      );
      assert.equal(await store.loadSteps(k, claim.token), undefined, 'nor gives any');
    }),
    check(
      'keeps steps across a takeover by the same request and drops them for another',
      async (store, key) => {
        if (!store.capabilities.steps || !store.saveStep || !store.loadSteps) return;
        const k = key();
        const crashed = await store.claim(k, { fingerprint: 'fp', leaseMs: lease, reserveMs: day });
        assert.ok(crashed.claimed, 'a claim of a free key wins (crashed)');
        assert.equal(await store.saveStep(k, crashed.token, 'charge', Buffer.from('ch_1')), true);
        await sleep(lease + 150);
        assert.equal(
          await store.saveStep(k, crashed.token, 'ship', Buffer.from('late')),
          false,
          'an expired holder records nothing',
        );
        const next = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000, reserveMs: day });
        assert.ok(next.claimed, 'a claim of a free key wins (next)');
        assert.equal(next.attempt, 2);
        const steps = await store.loadSteps(k, next.token);
        assert.deepEqual(Object.keys(steps ?? {}), ['charge'], 'the crashed attempt’s step');
        assertBytesEqual(steps?.charge as Uint8Array, Buffer.from('ch_1'), 'its result');
        assert.equal(
          await store.loadSteps(k, crashed.token),
          undefined,
          'the stale holder reads none',
        );

        // A dead claim that is not reserved may go to another request: it must not inherit the steps.
        const other = key('other');
        const first = await store.claim(other, { fingerprint: 'fp-a', leaseMs: lease });
        assert.ok(first.claimed, 'a claim of a free key wins (first)');
        assert.equal(await store.saveStep(other, first.token, 'charge', Buffer.from('a')), true);
        await sleep(lease + 150);
        const stranger = await store.claim(other, { fingerprint: 'fp-b', leaseMs: 60_000 });
        assert.ok(stranger.claimed, 'a claim of a free key wins (stranger)');
        assert.deepEqual(await store.loadSteps(other, stranger.token), {}, 'another request');
      },
    ),
    check('drops steps when the claim is released or its outcome expires', async (store, key) => {
      if (!store.capabilities.steps || !store.saveStep || !store.loadSteps) return;
      const k = key();
      const first = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000, reserveMs: day });
      assert.ok(first.claimed, 'a claim of a free key wins (first)');
      assert.equal(await store.saveStep(k, first.token, 'charge', Buffer.from('x')), true);
      assert.equal(await store.release(k, first.token), true);
      const again = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000, reserveMs: day });
      assert.ok(again.claimed, 'a claim of a free key wins (again)');
      assert.deepEqual(await store.loadSteps(k, again.token), {}, 'after a release');
      assert.equal(await store.saveStep(k, again.token, 'charge', Buffer.from('y')), true);
      assert.equal(await store.complete(k, again.token, Buffer.from('done'), 50), true);
      await sleep(200);
      const later = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000, reserveMs: day });
      assert.ok(later.claimed, 'the outcome expired');
      assert.deepEqual(await store.loadSteps(k, later.token), {}, 'after the outcome expired');
    }),
  );

  if (options.crossProcess === undefined) {
    checks.push(
      check(
        'is given a cross-process storm when it says it is shared across processes',
        async (store) => {
          assert.ok(
            !store.capabilities.crossProcess,
            `store '${store.name}' says it can be shared by several processes (capabilities.crossProcess), ` +
              'which only a storm of real processes can check: pass `crossProcess` (a module that builds the ' +
              'store in each process), or `crossProcess: false` to skip it knowingly',
          );
        },
      ),
    );
  } else if (options.crossProcess !== false) {
    const cp = options.crossProcess;
    checks.push({
      name: `gives exactly one winner per key across ${cp.processes ?? 4} OS processes`,
      async run() {
        const prefix = `storm:${process.pid}:${randomUUID().slice(0, 8)}:`;
        const keyCount = cp.keys ?? 200;
        const keys = Array.from({ length: keyCount }, (_, i) => `${prefix}${i}`);
        const result = await runClaimStorm(cp, keys);
        assert.deepEqual(result.errors, [], 'no claim failed');
        assert.equal(result.totalClaims, (cp.processes ?? 4) * (cp.claimsPerProcess ?? 2000));
        const wrong = [...result.winnersByKey].filter(([, wins]) => wins !== 1);
        assert.deepEqual(wrong, [], 'every key has exactly one winner');
        assert.equal(result.winnersByKey.size, keyCount);
      },
    });
    if (cp.takeovers !== false) {
      checks.push({
        name: `gives exactly one winner per takeover of expired leases across ${cp.processes ?? 4} OS processes, with growing tokens, fencing the crashed holders`,
        run: () => checkTakeoverStorm(cp, `takeover:${process.pid}:${randomUUID().slice(0, 8)}:`),
      });
    }
  }
  return checks;
}
