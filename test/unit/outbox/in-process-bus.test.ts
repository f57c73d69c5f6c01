import { describe, expect, it } from 'vitest';
import { createInProcessBus, createRelay, type OutboxMessage } from '../../../src/outbox/index.js';
import { memorySource } from '../../helpers/outbox-memory-source.js';

const message = (topic: string): OutboxMessage => ({
  id: 'm-1',
  topic,
  key: null,
  payload: new Uint8Array(),
  contentType: 'application/octet-stream',
  headers: { h: '1' },
  rowId: '1',
  attempt: 1,
  createdAt: 0,
});

describe('createInProcessBus', () => {
  it('resolves a publish only after every handler of the topic finished', async () => {
    // Arrange
    const bus = createInProcessBus();
    const done: string[] = [];
    bus.subscribe('t', async () => {
      await new Promise((r) => setTimeout(r, 20));
      done.push('slow');
    });
    bus.subscribe('t', () => {
      done.push('fast');
    });
    bus.subscribe('other', () => {
      done.push('other');
    });

    // Act
    await bus.publish(message('t'));

    // Assert
    expect(done.sort()).toEqual(['fast', 'slow']);
  });

  it('rejects when a handler fails, so the relay keeps the row and retries it', async () => {
    // Arrange
    const bus = createInProcessBus();
    bus.subscribe('t', () => {
      throw new Error('worker crashed');
    });

    // Act / Assert
    await expect(bus.publish(message('t'))).rejects.toThrow('worker crashed');
  });

  it('rejects a topic without subscribers unless told to drop it, and unsubscribes', async () => {
    // Arrange
    const strict = createInProcessBus();
    const lenient = createInProcessBus({ requireSubscriber: false });
    const off = strict.subscribe('t', () => {});

    // Act
    off();

    // Assert
    expect(strict.listenerCount('t')).toBe(0);
    await expect(strict.publish(message('t'))).rejects.toThrow(/no subscriber/);
    await expect(lenient.publish(message('t'))).resolves.toBeUndefined();
  });

  it('hands every handler the signal the relay aborts when it stops waiting, so a slow handler can stop', async () => {
    // Arrange: a handler slower than publishTimeoutMs. The relay gives up on it and delivers the message
    // again after the backoff; the bus ignored the relay's signal, so the first run had no way to know
    // and went on beside the second.
    const bus = createInProcessBus();
    const seen: Array<'aborted' | 'finished'> = [];
    bus.subscribe('t', (_message, { signal }) => {
      return new Promise<void>((resolve) => {
        const done = setTimeout(() => {
          seen.push('finished');
          resolve();
        }, 5_000);
        signal.addEventListener('abort', () => {
          clearTimeout(done);
          seen.push('aborted');
          resolve();
        });
      });
    });
    const source = memorySource();
    source.add('m-1', 't');
    const relay = createRelay({
      source,
      publisher: bus,
      publishTimeoutMs: 50,
      leaseMs: 1_000,
      backoff: () => 60_000,
    });

    // Act
    const round = await relay.runOnce();

    // Assert: the publish failed for the relay, and the handler heard of it at once.
    expect(round.failed).toBe(1);
    expect(seen).toEqual(['aborted']);
  });

  it('gives handlers a signal that is never aborted when the caller passes none', async () => {
    // Arrange
    const bus = createInProcessBus();
    const signals: AbortSignal[] = [];
    bus.subscribe('t', (_message, { signal }) => {
      signals.push(signal);
    });

    // Act
    await bus.publish(message('t'));

    // Assert
    expect(signals).toHaveLength(1);
    expect(signals[0]).toBeInstanceOf(AbortSignal);
    expect(signals[0]!.aborted).toBe(false);
  });
});
