import { describe, expect, it, vi } from 'vitest';
import {
  createIdempotency,
  isInvalidOptionsError,
  isLeaseLostError,
  isStoreUnavailableError,
  memoryStore,
  type Store,
} from '../../../src/index.js';
import { ManualClock } from '../../helpers/clock.js';
import { crashAfterCharge, manualEngine } from '../../helpers/crashed-step.js';
import { failingOpenEngine } from '../../helpers/failing-open.js';

function setup(options: Partial<Parameters<typeof createIdempotency>[0]> = {}) {
  const clock = new ManualClock();
  const store = memoryStore({ clock });
  const onLeaseLost = vi.fn();
  const onStoreError = vi.fn();
  const idempotency = createIdempotency({
    store,
    clock,
    extendLease: false,
    leaseMs: 1000,
    cache: false,
    hooks: { onLeaseLost, onStoreError },
    ...options,
  });
  return { clock, store, idempotency, onLeaseLost, onStoreError };
}

/** Let a started run reach the store and its first awaits. */
async function settle() {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('ctx.step', () => {
  it('runs each step once per request: a takeover gets the crashed attempt’s results', async () => {
    const { idempotency, clock } = setup();
    const charge = vi.fn(({ downstreamKey }: { downstreamKey: string }) => ({
      id: 'ch_1',
      downstreamKey,
    }));
    const ship = vi.fn(() => 'shipped');
    const order = { amount: 5 };

    // The first attempt charges, then its process "dies" before shipping.
    void idempotency.run({ key: 'k', payload: order }, async (ctx) => {
      await ctx.step('charge', charge);
      return new Promise(() => {});
    });
    await settle();
    expect(charge).toHaveBeenCalledTimes(1);
    clock.advance(1001);

    const outcome = await idempotency.run({ key: 'k', payload: order }, async (ctx) => {
      const charged = await ctx.step('charge', charge);
      const shipped = await ctx.step('ship', ship);
      return { charged, shipped, attempt: ctx.attempt };
    });
    expect(charge).toHaveBeenCalledTimes(1);
    expect(ship).toHaveBeenCalledTimes(1);
    expect(outcome).toMatchObject({
      status: 'executed',
      value: {
        charged: { id: 'ch_1', downstreamKey: expect.stringMatching(/^ik_[0-9a-f]{40}$/) },
        shipped: 'shipped',
        attempt: 2,
      },
    });
  });

  it('gives the step its downstream key and the attempt, and keeps undefined and bytes exact', async () => {
    const { idempotency, clock } = setup();
    const seen: unknown[] = [];
    void idempotency.run({ key: 'k' }, async (ctx) => {
      seen.push(await ctx.step('nothing', () => undefined));
      seen.push(await ctx.step('bytes', () => Uint8Array.of(0, 255, 7)));
      seen.push(await ctx.step('key', (step) => [step.downstreamKey, step.attempt]));
      seen.push(ctx.downstreamKey('key'));
      return new Promise(() => {});
    });
    await settle();
    clock.advance(1001);
    await idempotency.run({ key: 'k' }, async (ctx) => {
      seen.push(await ctx.step('nothing', () => 'ran again'));
      seen.push(await ctx.step('bytes', () => 'ran again'));
      seen.push(await ctx.step('key', () => 'ran again'));
    });
    const [nothing, bytes, key, downstreamKey, nothing2, bytes2, key2] = seen;
    expect(nothing).toBeUndefined();
    expect(nothing2).toBeUndefined();
    expect(bytes2).toEqual(bytes);
    expect(bytes2).toBeInstanceOf(Uint8Array);
    expect(key).toEqual([downstreamKey, 1]);
    expect(key2).toEqual(key);
  });

  it('runs a step named like an Object.prototype member that the crashed attempt had not recorded', async () => {
    const { idempotency, clock } = setup();
    void idempotency.run({ key: 'k' }, async (ctx) => {
      await ctx.step('first', () => 1);
      return new Promise(() => {});
    });
    await settle();
    clock.advance(1001);
    const outcome = await idempotency.run({ key: 'k' }, async (ctx) => [
      await ctx.step('first', () => 'again'),
      await ctx.step('constructor', () => 'ran'),
      await ctx.step('toString', () => 'ran too'),
    ]);
    expect(outcome).toMatchObject({ status: 'executed', value: [1, 'ran', 'ran too'], attempt: 2 });
  });

  it('reports each recorded step with its duration, and each replayed one, to the hooks', async () => {
    const onStepRecorded = vi.fn();
    const onStepReplayed = vi.fn();
    const engine = manualEngine({ onStepRecorded, onStepReplayed });
    const { idempotency, clock } = engine;
    // The crashed attempt's charge takes 30 ms.
    await crashAfterCharge(engine, 'k', () => {
      clock.advance(30);
      return 'ch_1';
    });
    const storageKey = idempotency.storageKeyFor('k');
    expect(onStepRecorded.mock.calls).toEqual([
      [
        {
          namespace: 'default',
          storageKey,
          token: expect.any(Number),
          attempt: 1,
          step: 'charge',
          durationMs: 30,
        },
      ],
    ]);
    expect(onStepReplayed).not.toHaveBeenCalled();

    const outcome = await idempotency.run({ key: 'k' }, async (ctx) => [
      await ctx.step('charge', () => 'ch_2'),
      await ctx.step('ship', () => 'shipped'),
    ]);
    expect(outcome).toMatchObject({ value: ['ch_1', 'shipped'], attempt: 2 });
    const token = (outcome as { token: number }).token;
    expect(onStepReplayed.mock.calls).toEqual([
      [{ namespace: 'default', storageKey, token, attempt: 2, step: 'charge' }],
    ]);
    expect(onStepRecorded).toHaveBeenCalledTimes(2);
    expect(onStepRecorded).toHaveBeenLastCalledWith(
      expect.objectContaining({ token, attempt: 2, step: 'ship', durationMs: 0 }),
    );
  });

  it('reports no step whose function threw, nor one it could not record', async () => {
    const onStepRecorded = vi.fn();
    const inner = memoryStore();
    const idempotency = createIdempotency({
      store: { ...inner, saveStep: () => Promise.resolve(false) },
      hooks: { onStepRecorded },
    });
    await expect(
      idempotency.run({ key: 'thrown' }, (ctx) =>
        ctx.step('call', () => {
          throw new Error('declined');
        }),
      ),
    ).rejects.toThrow('declined');
    const fenced = await idempotency
      .run({ key: 'fenced' }, (ctx) => ctx.step('call', () => 1))
      .catch((e: unknown) => e);
    expect(isLeaseLostError(fenced)).toBe(true);
    expect(onStepRecorded).not.toHaveBeenCalled();
  });

  it('runs a step again when the crashed attempt had not recorded it (the step threw)', async () => {
    const { idempotency, store } = setup();
    const flaky = vi.fn().mockRejectedValueOnce(new Error('provider down')).mockResolvedValue('ok');
    await expect(idempotency.run({ key: 'k' }, (ctx) => ctx.step('call', flaky))).rejects.toThrow(
      'provider down',
    );
    // The failure released the key: the retry is a new claim and runs the step.
    expect(await store.get(idempotency.storageKeyFor('k'))).toBeUndefined();
    const retry = await idempotency.run({ key: 'k' }, (ctx) => ctx.step('call', flaky));
    expect(retry).toMatchObject({ status: 'executed', value: 'ok', attempt: 1 });
    expect(flaky).toHaveBeenCalledTimes(2);
  });

  it('records nothing for an execution that lost its key, and says so once', async () => {
    const { idempotency, clock, onLeaseLost } = setup();
    let resume!: () => void;
    const paused = new Promise<void>((resolve) => {
      resume = resolve;
    });
    const stale = idempotency.run({ key: 'k' }, async (ctx) => {
      await paused;
      return ctx.step('charge', () => 'stale');
    });
    await settle();
    clock.advance(1001);
    const fresh = await idempotency.run({ key: 'k' }, (ctx) => ctx.step('charge', () => 'fresh'));
    expect(fresh).toMatchObject({ status: 'executed', value: 'fresh', attempt: 2 });
    resume();
    const error = await stale.catch((e: unknown) => e);
    expect(isLeaseLostError(error)).toBe(true);
    expect(onLeaseLost).toHaveBeenCalledTimes(1);
  });

  it('refuses invalid and repeated step names', async () => {
    const { idempotency } = setup();
    for (const name of ['', 'a b', 'é', 'x'.repeat(101), 'a/b']) {
      const error = await idempotency
        .run({ key: `k-${name.length}-${name.charCodeAt(0)}` }, (ctx) => ctx.step(name, () => 1))
        .catch((e: unknown) => e);
      expect(isInvalidOptionsError(error)).toBe(true);
    }
    const repeated = await idempotency
      .run({ key: 'twice' }, async (ctx) => {
        await ctx.step('a', () => 1);
        return ctx.step('a', () => 2);
      })
      .catch((e: unknown) => e);
    expect(isInvalidOptionsError(repeated)).toBe(true);
    expect((repeated as Error).message).toContain("step 'a' already ran");
  });

  it('refuses steps on a store that cannot record them', async () => {
    const inner = memoryStore();
    const { saveStep: _save, loadSteps: _load, ...rest } = inner;
    const store: Store = { ...rest, capabilities: { ...inner.capabilities, steps: false } };
    const idempotency = createIdempotency({ store });
    const error = await idempotency
      .run({ key: 'k' }, (ctx) => ctx.step('a', () => 1))
      .catch((e: unknown) => e);
    expect(isInvalidOptionsError(error)).toBe(true);
    expect((error as Error).message).toContain('cannot record steps');
  });

  it('fails the execution when the store cannot record a step, and reports it', async () => {
    const inner = memoryStore();
    const store: Store = {
      ...inner,
      saveStep: () => Promise.reject(new Error('connection refused')),
    };
    const onStoreError = vi.fn();
    const idempotency = createIdempotency({ store, hooks: { onStoreError } });
    const error = await idempotency
      .run({ key: 'k' }, (ctx) => ctx.step('a', () => 1))
      .catch((e: unknown) => e);
    expect(isStoreUnavailableError(error)).toBe(true);
    expect(onStoreError).toHaveBeenCalledWith(expect.objectContaining({ operation: 'saveStep' }));
    // Not released: the store may hold steps a release would delete (store-failed-steps.test.ts). The
    // claim is left to its lease, and a retry meets it in progress until then.
    expect(await inner.get(idempotency.storageKeyFor('k'))).toMatchObject({
      status: 'in_progress',
    });
    await expect(idempotency.run({ key: 'k' }, () => 'again')).resolves.toMatchObject({
      status: 'in_progress',
    });
  });

  it('runs steps unrecorded when the engine fails open', async () => {
    const idempotency = failingOpenEngine();
    const outcome = await idempotency.run({ key: 'k' }, (ctx) =>
      ctx.step('a', (step) => step.downstreamKey),
    );
    expect(outcome).toMatchObject({ status: 'executed', failedOpen: true });
  });

  it('holds steps to the same rules when the engine fails open: names, one run per name, codec, result as the codec gives it back', async () => {
    // Arrange: a store that is down, and an engine that fails open.
    const idempotency = failingOpenEngine();
    let charges = 0;
    const charge = () => {
      charges++;
      return { chargedAt: new Date(0) };
    };
    // Act / Assert: what fails with the store up fails the same way during the outage, before running.
    await expect(
      idempotency.run({ key: 'bad-name' }, (ctx) => ctx.step('no spaces', charge)),
    ).rejects.toThrow(/step name must match/);
    await expect(
      idempotency.run({ key: 'twice' }, async (ctx) => {
        await ctx.step('charge', charge);
        await ctx.step('charge', charge);
      }),
    ).rejects.toThrow(/already ran in this execution/);
    await expect(
      idempotency.run({ key: 'codec' }, (ctx) =>
        ctx.step('charge', charge, { codec: {} as never }),
      ),
    ).rejects.toThrow(/encode and decode functions/);
    expect(charges).toBe(1);
    // The result is what the codec gives back (a Date becomes a string), as with the store up.
    const outcome = await idempotency.run({ key: 'ok' }, (ctx) => ctx.step('charge', charge));
    expect(outcome).toMatchObject({
      failedOpen: true,
      value: { chargedAt: '1970-01-01T00:00:00.000Z' },
    });
  });
});
