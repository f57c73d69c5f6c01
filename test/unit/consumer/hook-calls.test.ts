/**
 * The calls into a consumer's hooks and their end (consumer/hook-calls.ts), the one switch every adapter's
 * `close()` turns as it resolves: each hook the application set is called, as a method of its hooks, until
 * then; none after, the adapters' own `onConsumerError` included.
 */
import { describe, expect, it } from 'vitest';
import { resolveConsumerOptions } from '../../../src/consumer/index.js';
import { memoryStore } from '../../../src/index.js';

describe('consumer hook calls', () => {
  it('calls each hook set until endHooks(), then none', () => {
    // Arrange
    const calls: string[] = [];
    const resolved = resolveConsumerOptions(
      {
        idempotency: { store: memoryStore() },
        name: 'billing',
        hooks: {
          onDeadLetter: (event) => void calls.push(`dead letter ${event.key}`),
          onConsumerError: (event) => void calls.push(`consumer error ${event.operation}`),
        },
      },
      () => 'k',
    );
    const event = { consumer: 'billing', message: 'm', key: 'k', deliveryCount: 1 };
    const deadLetter = {
      ...event,
      reason: 'handler_error' as const,
      error: { name: 'Error', message: 'boom' },
    };

    // Act
    resolved.hooks.onDeadLetter?.(deadLetter);
    resolved.hooks.onConsumerError?.({ consumer: 'billing', operation: 'read', error: 'x' });
    resolved.endHooks();
    resolved.hooks.onDeadLetter?.(deadLetter);
    resolved.hooks.onConsumerError?.({ consumer: 'billing', operation: 'read', error: 'x' });

    // Assert: only the hooks set are there, and nothing was called after the end.
    expect(calls).toEqual(['dead letter k', 'consumer error read']);
    expect(Object.keys(resolved.hooks).sort()).toEqual(['onConsumerError', 'onDeadLetter']);
  });

  it('calls a hook as a method of the hooks object, which keeps its `this`', () => {
    // Arrange: hooks of a class of the application's own.
    class Recorder {
      retries = 0;
      onRetry() {
        this.retries++;
      }
    }
    const recorder = new Recorder();
    const resolved = resolveConsumerOptions(
      { idempotency: { store: memoryStore() }, name: 'billing', hooks: recorder },
      () => 'k',
    );

    // Act
    resolved.hooks.onRetry?.({
      consumer: 'billing',
      message: 'm',
      key: 'k',
      deliveryCount: 1,
      reason: 'handler_error',
      delayMs: 10,
    });

    // Assert
    expect(recorder.retries).toBe(1);
  });
});
