import { afterEach, describe, expect, it, vi } from 'vitest';
import { Heartbeats } from '../../../src/core/heartbeat.js';

afterEach(() => {
  vi.useRealTimers();
});

function member() {
  const beats: number[] = [];
  return {
    beats,
    beat: async () => {
      beats.push(Date.now());
    },
  };
}

describe('Heartbeats', () => {
  it('beats a member first between 1 and 1.5 periods after it joins, then about every period', async () => {
    // Arrange
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const start = Date.now();
    const heartbeats = new Heartbeats();
    const m = member();
    // Act
    heartbeats.add(m, 100);
    await vi.advanceTimersByTimeAsync(1000);
    // Assert
    const offsets = m.beats.map((t) => t - start);
    expect(offsets[0]).toBeGreaterThanOrEqual(100);
    expect(offsets[0]).toBeLessThanOrEqual(150);
    for (let i = 1; i < offsets.length; i++) {
      expect(offsets[i]! - offsets[i - 1]!).toBeGreaterThanOrEqual(100);
      expect(offsets[i]! - offsets[i - 1]!).toBeLessThanOrEqual(150);
    }
    expect(offsets.length).toBeGreaterThanOrEqual(6);
  });

  it('never beats a member removed before its first beat, and stops its timer when none is left', async () => {
    // Arrange
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const heartbeats = new Heartbeats();
    const m = member();
    // Act
    heartbeats.add(m, 100);
    await vi.advanceTimersByTimeAsync(60);
    heartbeats.remove(m, 100);
    await vi.advanceTimersByTimeAsync(1000);
    // Assert
    expect(m.beats).toEqual([]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('keeps members of different periods on their own schedules', async () => {
    // Arrange
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const heartbeats = new Heartbeats();
    const fast = member();
    const slow = member();
    // Act
    heartbeats.add(fast, 10);
    heartbeats.add(slow, 1000);
    await vi.advanceTimersByTimeAsync(900);
    // Assert
    expect(fast.beats.length).toBeGreaterThan(50);
    expect(slow.beats).toEqual([]);
  });

  it('waits out a period longer than a timer can (a lease of months) instead of beating in a loop', async () => {
    // Arrange: real timers, since a delay past 2^31-1 ms is what Node itself fires at once. A 365-day
    // lease beats every third of it: a tick of 61 days.
    const heartbeats = new Heartbeats();
    const m = member();
    const periodMs = (365 * 86_400_000) / 3;
    // Act
    heartbeats.add(m, periodMs);
    await new Promise((resolve) => setTimeout(resolve, 100));
    heartbeats.remove(m, periodMs);
    // Assert: no beat is due for weeks.
    expect(m.beats).toEqual([]);
  });
});
