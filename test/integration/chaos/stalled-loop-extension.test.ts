/**
 * An event loop that stalls while a heartbeat's extension is on its way back (a long synchronous task, a GC
 * pause) past the lease's end by this process's count: the store extended the lease, and its answer is
 * already received when the loop runs again. Node runs its due timers before that I/O, so the lease's
 * expiry timer must not abort the run before the answer is read.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../../../src/index.js';
import { redisStore } from '../../../src/redis/index.js';
import type { Store } from '../../../src/store/store.js';
import { env } from '../../helpers/env.js';

const LEASE_MS = 3000;
// The stall ends this long after the lease's end by this process's count (the run's start plus the lease),
// and the run this long after that: both well before the end the store counts from the first beat's
// extension (a third of the lease later at least).
const STALL_PAST_END_MS = 100;
const RUN_PAST_END_MS = 400;
// Keeps Redis busy so that the extension's answer comes back during the stall, not before it.
const BUSY_REDIS_SCRIPT = `local t = redis.call('TIME')
local stop = t[1] * 1000000 + t[2] + 100000
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] > stop
return 1`;

function spinUntil(until: number): void {
  while (performance.now() < until) {
    // busy on purpose: the stall
  }
}

describe('an event loop stalled while an extension is answered', () => {
  let client: Redis;
  let busy: Redis;

  beforeAll(async () => {
    client = new Redis(env.redisUrl);
    busy = new Redis(env.redisUrl);
    await busy.ping();
  });
  afterAll(async () => {
    await client?.quit();
    await busy?.quit();
  });

  it('does not abort the run whose lease the store extended', async () => {
    // Arrange: the first extension is sent behind a 100 ms script, and the loop stalls right after.
    const store = redisStore({ client, prefix: `stalled-loop:${process.pid}:${Date.now()}:` });
    let stalled = false;
    let startedAt = Number.NaN;
    const answers: boolean[] = [];
    const stalling: Store = Object.create(store);
    stalling.extend = async (key, token, leaseMs) => {
      if (!stalled) {
        stalled = true;
        void busy.eval(BUSY_REDIS_SCRIPT, 0);
        setImmediate(() => spinUntil(startedAt + LEASE_MS + STALL_PAST_END_MS));
      }
      const held = await store.extend(key, token, leaseMs);
      answers.push(held);
      return held;
    };
    const idempotency = createIdempotency({ store: stalling, leaseMs: LEASE_MS });
    let aborted = false;

    // Act: a run that ends soon after the stall, before the store's end of its extended lease.
    const outcome = await idempotency.run({ key: 'stalled-loop' }, async (context) => {
      startedAt = performance.now();
      context.signal.addEventListener('abort', () => {
        aborted = true;
      });
      while (performance.now() < startedAt + LEASE_MS + RUN_PAST_END_MS) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return 'done';
    });

    // Assert: before, the expiry timer ran before the answer `true` was read, and aborted a held lease.
    expect(stalled).toBe(true);
    expect(answers[0]).toBe(true);
    expect(aborted).toBe(false);
    expect(outcome.status).toBe('executed');
  });
});
