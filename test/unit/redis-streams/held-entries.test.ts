/**
 * The entries a consumer process holds, as its claim rounds see them: left to their deliveries while one
 * of them still resets their idle time (an event loop stalled past `minIdle` made a round take a held
 * entry and start a second delivery), taken again once none does (a hung handler past `maxExecution`,
 * whose entry the broker is meant to redeliver).
 */
import { describe, expect, it } from 'vitest';
import { HeldEntries } from '../../../src/redis-streams/held-entries.js';

describe('HeldEntries', () => {
  it('lists a held entry as live until its delivery ends', () => {
    const handling = new HeldEntries();
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
    const handling = new HeldEntries();
    const held = handling.hold('1-0');

    handling.expire('1-0');

    expect(handling.liveIds()).toEqual([]);
    expect(handling.isLive('1-0')).toBe(false);
    expect(handling.get('1-0')).toBe(held);
  });

  it('counts each delivery: a redelivery beside a hung one is live only while it runs', () => {
    // Arrange: the first delivery hangs, its keep-alive expired; a claim round starts a second one.
    const handling = new HeldEntries();
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
});
