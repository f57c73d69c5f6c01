import { describe, expect, it, vi } from 'vitest';
import { combineHooks, createIdempotency, memoryStore } from '../../../src/index.js';

describe('combineHooks', () => {
  it('calls every member that defines a hook, in order', async () => {
    const calls: string[] = [];
    const hooks = combineHooks({ onExecuted: () => calls.push('metrics') }, undefined, {
      onExecuted: () => calls.push('traces'),
      onReplayed: () => calls.push('replayed'),
    });
    const idempotency = createIdempotency({ store: memoryStore(), hooks });
    await idempotency.run({ key: 'k' }, () => 1);
    await idempotency.run({ key: 'k' }, () => 1);
    expect(calls).toEqual(['metrics', 'traces', 'replayed']);
  });

  it('isolates a member that throws: the others still run and the outcome is unchanged', async () => {
    const after = vi.fn();
    const hooks = combineHooks(
      {
        onExecuted: () => {
          throw new Error('metrics broke');
        },
      },
      { onExecuted: after },
    );
    const idempotency = createIdempotency({ store: memoryStore(), hooks });
    await expect(idempotency.run({ key: 'k' }, () => 1)).resolves.toMatchObject({
      status: 'executed',
    });
    expect(after).toHaveBeenCalledOnce();
  });

  it('sets only the hooks some member defines, so unobserved events stay free', () => {
    const hooks = combineHooks({ onMismatch: () => {} }, { onConflict: () => {} });
    expect(Object.keys(hooks).sort()).toEqual(['onConflict', 'onMismatch']);
    expect(combineHooks()).toEqual({});
  });

  it('combines any hook set, consumer hooks too, keeping only the on… callbacks and their `this`', () => {
    const seen: string[] = [];
    const counting = {
      metrics: { count: 0 },
      onDeadLetter(this: { metrics: { count: number } }, event: { reason: string }) {
        this.metrics.count++;
        seen.push(`counted ${event.reason}`);
      },
    };
    const hooks = combineHooks<{ onDeadLetter?(event: { reason: string }): void }>(counting, {
      onDeadLetter: (event) => seen.push(`alerted ${event.reason}`),
    });
    hooks.onDeadLetter?.({ reason: 'mismatch' });
    expect(Object.keys(hooks)).toEqual(['onDeadLetter']);
    expect(seen).toEqual(['counted mismatch', 'alerted mismatch']);
    expect(counting.metrics.count).toBe(1);
  });
});
