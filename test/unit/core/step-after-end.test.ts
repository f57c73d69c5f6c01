/**
 * A step called once its run has ended (the handler returned or threw while something it started went on:
 * the sibling of a failed step in `Promise.all`, a timer, code after an HTTP response) can no longer be
 * recorded: the claim is completed, or released. Such a step used to run its effect anyway and then reject
 * as a lost lease: after a release, the client's retry charged a second time (reproduced on SQLite, Redis
 * and PostgreSQL). It is now refused before its effect starts, and a lease that was never lost is not
 * reported as one.
 */
import { describe, expect, it, vi } from 'vitest';
import { createIdempotency, isLeaseLostError, memoryStore } from '../../../src/index.js';

function setup() {
  const onLeaseLost = vi.fn();
  const idempotency = createIdempotency({
    store: memoryStore(),
    leaseMs: 60_000,
    cache: false,
    hooks: { onLeaseLost },
  });
  return { idempotency, onLeaseLost };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('a step after its run ended', () => {
  it('does not charge beside the retry when the handler threw before the step started', async () => {
    // Arrange
    const { idempotency, onLeaseLost } = setup();
    const charge = vi.fn(() => 'ch_1');
    let started!: () => void;
    const siblingMayStart = new Promise<void>((resolve) => (started = resolve));
    let late: Promise<unknown> | undefined;
    const declined = idempotency.run({ key: 'order-1' }, async (ctx) => {
      // The charge waits for something (a fraud check) while its sibling fails: Promise.all rejects at
      // once, the handler throws, and the engine releases the claim.
      late = siblingMayStart.then(() => ctx.step('charge', charge));
      late.catch(() => {});
      await Promise.all([
        late,
        ctx.step('validate', () => {
          throw new Error('declined');
        }),
      ]);
    });
    await expect(declined).rejects.toThrow('declined');

    // Act
    started();
    const lateError = await late?.then(
      () => undefined,
      (error: unknown) => error,
    );
    const retry = await idempotency.run({ key: 'order-1' }, (ctx) => ctx.step('charge', charge));

    // Assert
    expect(charge).toHaveBeenCalledTimes(1);
    expect(retry.status).toBe('executed');
    expect(isLeaseLostError(lateError)).toBe(true);
    expect(String((lateError as Error).message)).toContain('after its execution ended');
    expect(onLeaseLost).not.toHaveBeenCalled();
  });

  it('refuses a step called after the run completed, without running it or reporting a lost lease', async () => {
    // Arrange
    const { idempotency, onLeaseLost } = setup();
    const notify = vi.fn(() => 'sent');
    let step: ((name: string, fn: () => string) => Promise<string>) | undefined;
    await idempotency.run({ key: 'order-2' }, (ctx) => {
      step = (name, fn) => ctx.step(name, fn);
      return 'done';
    });

    // Act
    const error = await step?.('notify', notify).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );

    // Assert
    expect(isLeaseLostError(error)).toBe(true);
    expect(notify).not.toHaveBeenCalled();
    expect(onLeaseLost).not.toHaveBeenCalled();
  });

  it('rejects a step the run outlived while it ran as not recorded, not as a lost lease', async () => {
    // Arrange: the step's function is under way when the handler returns without waiting for it.
    const { idempotency, onLeaseLost } = setup();
    let finish!: (value: string) => void;
    let running: Promise<string> | undefined;
    await idempotency.run({ key: 'order-3' }, (ctx) => {
      running = ctx.step('ship', () => new Promise<string>((resolve) => (finish = resolve)));
      running.catch(() => {});
      return 'done';
    });
    await tick();

    // Act: it returns after the completion, so the store refuses its record.
    finish('trk_1');
    const error = await running?.then(
      () => undefined,
      (thrown: unknown) => thrown,
    );

    // Assert
    expect(isLeaseLostError(error)).toBe(true);
    expect(String((error as Error).message)).toContain('after its execution ended');
    expect(onLeaseLost).not.toHaveBeenCalled();
  });
});
