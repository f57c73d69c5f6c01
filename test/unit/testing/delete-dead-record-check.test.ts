/**
 * `delete` of a dead record (an expired lease, reserved or not, or an expired outcome): every built-in
 * store reports `false` (only a live record counts, as for `get`) and removes it all the same, reservation
 * included. The suite must fail a store that reports the dead record as one that existed, and one that
 * leaves a dead, reserved lease in place (so the key stays refused to other requests after an operator
 * deleted it).
 */
import { describe, expect, it } from 'vitest';
import { memoryStore, type Store } from '../../../src/index.js';
import { storeConformanceChecks } from '../../../src/testing/index.js';

const CHECK = 'deletes a dead record';

/** `delete` answers whether any record, dead or alive, was there. */
function existenceDeleteStore(): Store {
  const store = memoryStore();
  return {
    ...store,
    async delete(key) {
      const existed =
        (await store.get(key)) !== undefined || (await store.inspect(key)) !== undefined;
      await store.delete(key);
      return existed;
    },
  };
}

/** `delete` removes live records only: a crashed claim's reservation survives it. */
function liveOnlyDeleteStore(): Store {
  const store = memoryStore();
  return {
    ...store,
    delete: async (key) => ((await store.get(key)) === undefined ? false : store.delete(key)),
  };
}

function deleteCheck(createStore: () => Store) {
  const check = storeConformanceChecks({ name: 'delete', createStore }).find((c) =>
    c.name.startsWith(CHECK),
  );
  if (check === undefined) throw new Error(`no check named like '${CHECK}'`);
  return check;
}

describe('the store conformance suite, on deleting a dead record', () => {
  it('fails a store whose delete reports a dead record as one that existed', async () => {
    await expect(deleteCheck(existenceDeleteStore).run()).rejects.toThrow(
      /delete of an expired lease still reserved for its request returns false/,
    );
  });

  it('fails a store whose delete leaves a dead, reserved lease in place', async () => {
    await expect(deleteCheck(liveOnlyDeleteStore).run()).rejects.toThrow(
      /delete removed an expired lease still reserved/,
    );
  });

  it('passes the memory store', async () => {
    await deleteCheck(() => memoryStore()).run();
  });
});
