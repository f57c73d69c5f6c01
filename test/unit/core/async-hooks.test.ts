import { afterEach, describe, expect, it } from 'vitest';
import { combineHooks, createIdempotency, memoryStore } from '../../../src/index.js';

const unhandled: unknown[] = [];
const record = (reason: unknown) => unhandled.push(reason);

async function settleRejections() {
  // Unhandled rejections are reported after the microtask queue drains.
  await new Promise((resolve) => setTimeout(resolve, 20));
}

afterEach(() => {
  process.off('unhandledRejection', record);
  unhandled.length = 0;
});

describe('async hooks', () => {
  it('ignores a hook whose promise rejects: no unhandled rejection, the outcome unchanged', async () => {
    process.on('unhandledRejection', record);
    const idempotency = createIdempotency({
      store: memoryStore(),
      hooks: {
        onExecuted: async () => {
          throw new Error('metrics backend down');
        },
        onReplayed: () => Promise.reject(new Error('log sink down')),
      },
    });
    await expect(idempotency.run({ key: 'k' }, () => 'charged')).resolves.toMatchObject({
      status: 'executed',
    });
    await expect(idempotency.run({ key: 'k' }, () => 'never')).resolves.toMatchObject({
      status: 'replayed',
    });
    await settleRejections();
    expect(unhandled).toEqual([]);
  });

  it('isolates a combined member whose promise rejects', async () => {
    process.on('unhandledRejection', record);
    const seen: string[] = [];
    const hooks = combineHooks(
      {
        onExecuted: async () => {
          throw new Error('metrics backend down');
        },
      },
      { onExecuted: () => seen.push('traces') },
    );
    const idempotency = createIdempotency({ store: memoryStore(), hooks });
    await expect(idempotency.run({ key: 'k' }, () => 1)).resolves.toMatchObject({
      status: 'executed',
    });
    await settleRejections();
    expect(seen).toEqual(['traces']);
    expect(unhandled).toEqual([]);
  });
});
