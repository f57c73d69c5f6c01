/**
 * `listCrashedKeys` on the memory store with a manual clock: the keys `inspectKey` reports as crashed,
 * in the same shape, a page at a time in byte order of the keys; and a clear error for a store without
 * `listCrashed`. The wrappers the engine and the Prometheus adapter put around a store pass it through.
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  InvalidOptionsError,
  inspectKey,
  listCrashedKeys,
  memoryStore,
  type Store,
} from '../../../src/index.js';
import { withStoreMetrics } from '../../../src/prometheus/index.js';
import { withBatching } from '../../../src/store/batching.js';
import { ManualClock } from '../../helpers/clock.js';

const DAY = 86_400_000;

/** A memory store holding crashed claims of `crashed`, and one of each state that is not crashed. */
async function storeWithCrashes(crashed: readonly string[]) {
  const clock = new ManualClock();
  const store = memoryStore({ clock });
  for (const key of crashed) {
    expect(
      (await store.claim(key, { fingerprint: `fp-${key}`, leaseMs: 100, reserveMs: DAY })).claimed,
    ).toBe(true);
  }
  await store.claim('ended', { fingerprint: 'fp', leaseMs: 100, reserveMs: 150 });
  await store.claim('unreserved', { fingerprint: 'fp', leaseMs: 100 });
  clock.advance(200);
  await store.claim('live', { fingerprint: 'fp', leaseMs: 60_000, reserveMs: DAY });
  const done = await store.claim('done', { fingerprint: 'fp', leaseMs: 60_000 });
  if (done.claimed) await store.complete('done', done.token, Uint8Array.of(1), DAY);
  return { clock, store };
}

describe('listCrashedKeys', () => {
  it('lists the keys inspectKey reports as crashed, in its shape, a page at a time in byte order', async () => {
    // Arrange: 'Z' (0x5a) sorts before 'a' (0x61) in bytes; 'é' (0xc3 0xa9) after 'z'.
    const crashed = ['b', 'a', 'é', 'Z', 'c'];
    const { store } = await storeWithCrashes(crashed);
    // Act
    const first = await listCrashedKeys(store, { limit: 2 });
    const second = await listCrashedKeys(store, { limit: 2, after: first.next });
    const third = await listCrashedKeys(store, { limit: 2, after: second.next });
    // Assert
    expect(first.keys.map((k) => k.storageKey)).toEqual(['Z', 'a']);
    expect(first.next).toBe('a');
    expect(second.keys.map((k) => k.storageKey)).toEqual(['b', 'c']);
    expect(third.keys.map((k) => k.storageKey)).toEqual(['é']);
    expect(third.next).toBeUndefined();
    expect(first.keys[0]).toEqual(await inspectKey(store, 'Z'));
    expect(first.keys[0]).toMatchObject({ state: 'crashed', source: 'inspect' });
  });

  it('starts after any key, and says no more when the last page is exactly full', async () => {
    const { store } = await storeWithCrashes(['a', 'b', 'c']);
    const page = await listCrashedKeys(store, { limit: 2, after: 'a0' });
    expect(page).toMatchObject({ keys: [{ storageKey: 'b' }, { storageKey: 'c' }] });
    expect(page.next).toBeUndefined();
    expect((await listCrashedKeys(store, { limit: 5, after: 'c' })).keys).toEqual([]);
  });

  it('drops a key once its reservation ends or its own request takes it over', async () => {
    const { clock, store } = await storeWithCrashes(['a', 'b']);
    expect(await store.claim('a', { fingerprint: 'fp-a', leaseMs: 60_000 })).toMatchObject({
      claimed: true,
    });
    expect((await listCrashedKeys(store, { limit: 10 })).keys.map((k) => k.storageKey)).toEqual([
      'b',
    ]);
    clock.advance(DAY);
    expect((await listCrashedKeys(store, { limit: 10 })).keys).toEqual([]);
  });

  it('refuses a bad limit, and a store without listCrashed, with InvalidOptionsError', async () => {
    const { store } = await storeWithCrashes(['a']);
    await expect(listCrashedKeys(store, { limit: 0 })).rejects.toThrow(InvalidOptionsError);
    const { listCrashed: _, ...bare } = store;
    const without: Store = { ...bare, name: 'custom' };
    await expect(listCrashedKeys(without, { limit: 10 })).rejects.toThrow(
      /the custom store cannot list crashed keys/,
    );
  });

  it('works through withBatching and withStoreMetrics, which pass listCrashed through', async () => {
    const { store } = await storeWithCrashes(['a', 'b']);
    const metrics = withStoreMetrics(store, { registry: new Registry() });
    for (const wrapped of [withBatching(store), metrics, withBatching(metrics)]) {
      expect(wrapped).not.toBe(store);
      expect((await listCrashedKeys(wrapped, { limit: 10 })).keys.map((k) => k.storageKey)).toEqual(
        ['a', 'b'],
      );
    }
  });
});
