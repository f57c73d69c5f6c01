/**
 * The takeover storm: expired leases taken over by several processes at once, generation after
 * generation. It must fail a store whose takeovers are atomic only within one process (an in-process lock
 * around a read and a write) and one whose tokens come from a per-process counter, both of which pass
 * every single-process check and the claim storm (whose leases never end); and pass the SQLite store.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { storeConformanceChecks } from '../../../src/testing/index.js';
import type { TakeoverStormResult } from '../../../src/testing/takeover-storm.js';
import { assertTakeoverStorm } from '../../../src/testing/takeover-storm-check.js';
import { createStore, type TakeoverFactoryArgument } from './fixtures/takeover-factory.js';

const dir = mkdtempSync(join(tmpdir(), 'ik-takeover-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** The suite's checks for the SQLite store with `fault`, its storm processes sharing one fresh file. */
function checksFor(fault?: TakeoverFactoryArgument['fault']) {
  const argument: TakeoverFactoryArgument = {
    file: join(dir, `storm-${++files}.db`),
    ...(fault === undefined ? {} : { fault }),
  };
  return storeConformanceChecks({
    name: `sqlite ${fault ?? 'correct'}`,
    storeClock: 'process',
    createStore: () => createStore({ ...argument, file: join(dir, `check-${++files}.db`) }),
    disposeStore: (store) => store.close?.(),
    crossProcess: { module: new URL('./fixtures/takeover-factory.ts', import.meta.url), argument },
  });
}

function checkNamed(checks: ReturnType<typeof checksFor>, fragment: string) {
  const check = checks.find((c) => c.name.includes(fragment));
  if (check === undefined) throw new Error(`no check named like '${fragment}'`);
  return check;
}

const STORM = 'per takeover of expired leases across 4 OS processes';

// Each storm starts 4 processes through tsx (seconds on a loaded machine) and runs 4 generations of 1 s
// leases.
describe('the takeover storm', { timeout: 60_000 }, () => {
  it('fails a store whose takeovers are atomic only within one process', async () => {
    const checks = checksFor('in-process-lock');
    // The single-process takeover check passes it: its lock serialises one process's takeovers.
    await checkNamed(checks, 'one winner among concurrent takeovers').run();
    await expect(checkNamed(checks, STORM).run()).rejects.toThrow(
      /exactly one winner per key among the takeover generation \d of several processes/,
    );
  });

  it('fails a store whose tokens come from a counter of the process that claims', async () => {
    const checks = checksFor('process-tokens');
    // One process's counter only grows: the single-process token checks pass it.
    await checkNamed(checks, 'takes over an expired lease with a larger token').run();
    await checkNamed(checks, 'so the next claim wins with a larger token').run();
    await expect(checkNamed(checks, STORM).run()).rejects.toThrow(
      /not above the crashed holder's .*tokens strictly increase per key/,
    );
  });

  it('passes the SQLite store', async () => {
    await checkNamed(checksFor(), STORM).run();
  });

  it('is skipped knowingly with takeovers: false', () => {
    const checks = storeConformanceChecks({
      name: 'no takeovers',
      createStore: () => createStore({ file: join(dir, 'unused.db') }),
      storeClock: 'process',
      crossProcess: { module: 'unused.js', takeovers: false },
    });
    expect(checks.some((c) => c.name.includes('per takeover'))).toBe(false);
    expect(checks.some((c) => c.name.includes('OS processes'))).toBe(true);
  });
});

describe('the takeover storm’s settings', () => {
  const withTakeovers = (takeovers: unknown) => () =>
    storeConformanceChecks({
      name: 'settings',
      createStore: () => createStore({ file: join(dir, 'unused.db') }),
      crossProcess: { module: 'unused.js', takeovers: takeovers as false },
    });

  it('refuses settings that would check nothing or never end, naming them', () => {
    expect(withTakeovers({ generation: 3 })).toThrow(
      /crossProcess.takeovers: unknown field "generation"/,
    );
    expect(withTakeovers({ generations: 1 })).toThrow(
      /generations must be an integer of at least 2/,
    );
    expect(withTakeovers({ keys: 0 })).toThrow(/keys must be a positive integer/);
    expect(withTakeovers({ leaseMs: Number.NaN })).toThrow(/leaseMs must be a positive number/);
    expect(withTakeovers('yes')).toThrow(/must be an object or false/);
  });

  it('refuses a roundTrips that is not a function', () => {
    expect(() =>
      storeConformanceChecks({
        name: 'settings',
        createStore: () => createStore({ file: join(dir, 'unused.db') }),
        roundTrips: 3 as unknown as () => number,
      }),
    ).toThrow(/roundTrips must be a function/);
  });
});

describe('the takeover storm’s verdict', () => {
  const generation = (tokens: Record<string, number[]>, durationMs = 10) => ({
    winners: new Map(Object.entries(tokens)),
    staleCompletes: [] as TakeoverStormResult['generations'][number]['staleCompletes'],
    durationMs,
  });

  it('fails a store that accepts a crashed holder’s completion', () => {
    const later = generation({ a: [20] });
    later.staleCompletes.push({ key: 'a', token: 10, ok: true });
    const result: TakeoverStormResult = {
      leaseMs: 1000,
      startupMs: 0,
      generations: [generation({ a: [10] }), later],
      finalCompletes: [{ key: 'a', token: 20, ok: true }],
      errors: [],
    };
    expect(() => assertTakeoverStorm(result)).toThrow(
      /takeover generation 1: a crashed holder completed after its lease had ended/,
    );
  });

  it('names a generation slower than the lease instead of blaming the store', () => {
    const result: TakeoverStormResult = {
      leaseMs: 1000,
      startupMs: 0,
      generations: [generation({ a: [10] }), generation({ a: [20, 21] }, 1500)],
      finalCompletes: [],
      errors: [],
    };
    expect(() => assertTakeoverStorm(result)).toThrow(
      /took 1500 ms, longer than the 1000 ms lease.*raise `crossProcess.takeovers.leaseMs`/,
    );
  });

  it('fails a holder of the last generation whose completion is refused', () => {
    const result: TakeoverStormResult = {
      leaseMs: 1000,
      startupMs: 0,
      generations: [generation({ a: [10] })],
      finalCompletes: [{ key: 'a', token: 10, ok: false }],
      errors: [],
    };
    expect(() => assertTakeoverStorm(result)).toThrow(/holders of the last generation complete/);
  });
});
