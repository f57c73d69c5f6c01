/**
 * The entries a consumer process holds, as its claim rounds see them: left to their deliveries while one
 * of them still resets their idle time (an event loop stalled past `minIdle` made a round take a held
 * entry and start a second delivery), taken again once none does (a hung handler past `maxExecution`,
 * whose entry the broker is meant to redeliver).
 */
import { describe, expect, it } from 'vitest';
import { HeldEntries } from '../../../src/redis-streams/held-entries.js';
import { LiveEntries } from '../../../src/redis-streams/live-entries.js';

// A stream of its own per instance, so that the tests share no live entries.
let streams = 0;
const heldEntries = () => new HeldEntries(new LiveEntries(`held-entries-${++streams}`, 'g'));

describe('HeldEntries', () => {
  it('lists a held entry as live until its delivery ends', () => {
    const handling = heldEntries();
    handling.hold('1-0');
    handling.hold('2-0');

    expect(handling.liveIds()).toEqual(['1-0', '2-0']);
    expect(handling.isLive('1-0')).toBe(true);

    handling.release('1-0');
    expect(handling.liveIds()).toEqual(['2-0']);
    expect(handling.isLive('1-0')).toBe(false);
    expect(handling.get('1-0')).toBeUndefined();
  });

  it('no longer lists an entry whose only delivery stopped resetting it, though it is still held', () => {
    const handling = heldEntries();
    const held = handling.hold('1-0');

    handling.expire('1-0');

    expect(handling.liveIds()).toEqual([]);
    expect(handling.isLive('1-0')).toBe(false);
    expect(handling.get('1-0')).toBe(held);
  });

  it('counts each delivery: a redelivery beside a hung one is live only while it runs', () => {
    // Arrange: the first delivery hangs, its keep-alive expired; a claim round starts a second one.
    const handling = heldEntries();
    const first = handling.hold('1-0');
    handling.expire('1-0');
    const second = handling.hold('1-0');

    // Assert: one record, live while the second runs.
    expect(second).toBe(first);
    expect(handling.isLive('1-0')).toBe(true);

    // Act: the second delivery ends (it met the key in progress, and retried).
    handling.release('1-0');

    // Assert: the hung one still holds the entry, but no longer keeps it from the claim rounds.
    expect(handling.get('1-0')).toBe(first);
    expect(handling.isLive('1-0')).toBe(false);
    expect(handling.liveIds()).toEqual([]);

    // Act: the hung one ends at last.
    handling.release('1-0', true);
    expect(handling.get('1-0')).toBeUndefined();
  });

  describe('two consumer instances of one process on the stream and group', () => {
    it("lists each one's live entries to both: their claim rounds leave them alone", () => {
      // Arrange
      const a = new HeldEntries(new LiveEntries('orders', 'shipping'));
      const b = new HeldEntries(new LiveEntries('orders', 'shipping'));
      // Act
      a.hold('1-0');
      b.hold('2-0');
      // Assert: before, each listed its own only, and its claim round took the other's.
      expect(a.liveIds()).toEqual(['1-0', '2-0']);
      expect(b.liveIds()).toEqual(['1-0', '2-0']);
      expect(b.isLive('1-0')).toBe(true);
      // The records stay each instance's own.
      expect(b.get('1-0')).toBeUndefined();
      a.release('1-0');
      b.release('2-0');
      expect(a.liveIds()).toEqual([]);
    });

    it('keeps an entry live while a delivery of it in either instance still resets it', () => {
      // Arrange: instance a's delivery hung (its lease lost); instance b runs the entry again.
      const a = new HeldEntries(new LiveEntries('orders', 'hung'));
      const b = new HeldEntries(new LiveEntries('orders', 'hung'));
      a.hold('1-0');
      b.hold('1-0');
      // Act
      a.expire('1-0');
      // Assert
      expect(a.isLive('1-0')).toBe(true);
      b.release('1-0');
      expect(a.isLive('1-0')).toBe(false);
      a.release('1-0', true);
      expect(a.liveIds()).toEqual([]);
    });

    it('shares nothing with another stream or group', () => {
      // Arrange
      const orders = new HeldEntries(new LiveEntries('orders:a', 'b'));
      const other = new HeldEntries(new LiveEntries('orders', 'a:b'));
      // Act
      orders.hold('1-0');
      // Assert
      expect(other.liveIds()).toEqual([]);
      orders.release('1-0');
    });
  });
});
