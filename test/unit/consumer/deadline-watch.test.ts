/**
 * The consumer's store deadlines share one timer (store-deadline.ts): each delivery's deadline is told
 * once it has passed, never before, never twice, and not at all once unwatched.
 */
import { describe, expect, it } from 'vitest';
import {
  DeadlineWatch,
  deadlineWatchFor,
  type Watched,
} from '../../../src/consumer/store-deadline.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function watched(): Watched & { told: number[] } {
  const item = {
    deadlineAt: 0,
    told: [] as number[],
    deadlinePassed() {
      item.told.push(performance.now());
    },
  };
  return item;
}

describe('DeadlineWatch', () => {
  it('tells an item once, after its deadline, and never one unwatched', async () => {
    // Arrange
    const watch = new DeadlineWatch(5);
    const due = watched();
    const answered = watched();
    const start = performance.now();
    // Act
    watch.watch(due, 40);
    watch.watch(answered, 40);
    watch.unwatch(answered);
    await sleep(150);
    // Assert
    expect(due.told).toHaveLength(1);
    expect((due.told[0] as number) - start).toBeGreaterThanOrEqual(39);
    expect(answered.told).toHaveLength(0);
  });

  it('moves an item watched again to its new deadline', async () => {
    // Arrange
    const watch = new DeadlineWatch(5);
    const item = watched();
    // Act: watched for 20 ms, then again for 200 ms before the first passed.
    watch.watch(item, 20);
    watch.watch(item, 200);
    await sleep(80);
    const toldEarly = item.told.length;
    await sleep(250);
    // Assert
    expect(toldEarly).toBe(0);
    expect(item.told).toHaveLength(1);
  });

  it('shares one watch between consumers of one period', () => {
    expect(deadlineWatchFor(30_000)).toBe(deadlineWatchFor(30_000));
    expect(deadlineWatchFor(30_000)).toBe(deadlineWatchFor(8_000));
    expect(deadlineWatchFor(80)).not.toBe(deadlineWatchFor(30_000));
  });
});
