import { describe, expect, it } from 'vitest';
import { createInProcessBus, type OutboxMessage } from '../../../src/outbox/index.js';

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
});
