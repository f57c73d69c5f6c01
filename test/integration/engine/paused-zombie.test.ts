/**
 * A paused zombie on every shared store (SQLite file, Redis, PostgreSQL): a worker process claims a key and
 * is frozen with SIGSTOP mid-handler, so its lease runs out without it knowing; another process takes the
 * key over and completes it; the zombie is then thawed with SIGCONT and finishes its handler. Its late
 * completion must be fenced out by its token: the engine reports the lease lost to it, and the record
 * keeps the takeover's outcome, which every later request replays.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { createIdempotency, RecordStatus, type Store } from '../../../src/index.js';
import { helperPath as helper, sharedStoreBackends } from '../../helpers/shared-store-backends.js';
import type { ZombieConfig, ZombieMessage } from '../../helpers/zombie-child.js';

// Long enough that the zombie's lease is surely live when the rescuer first tries, on a loaded machine.
const LEASE_MS = 2000;

const backends = sharedStoreBackends('zombie');

/** The zombie-to-be: a forked child whose messages are collected, with a wait for each kind. */
function startZombie(config: ZombieConfig) {
  const messages: ZombieMessage[] = [];
  const waiters: Array<() => void> = [];
  const child: ChildProcess = fork(helper('zombie-child.ts'), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, IK_ZOMBIE: JSON.stringify(config) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  child.on('message', (message: ZombieMessage) => {
    messages.push(message);
    for (const wake of waiters.splice(0)) wake();
  });
  /** The first message of one of `types`. */
  const next = async <T extends ZombieMessage['type']>(types: T[], timeoutMs = 20_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = messages.find((m) => (types as string[]).includes(m.type));
      if (found !== undefined) return found as Extract<ZombieMessage, { type: T }>;
      if (Date.now() > deadline) throw new Error(`the child never reported ${types.join(' or ')}`);
      await new Promise<void>((resolve) => {
        waiters.push(resolve);
        setTimeout(resolve, 100);
      });
    }
  };
  return { child, messages, next };
}

for (const backend of backends) {
  describe(`a paused zombie on ${backend.name}`, () => {
    const opened: Store[] = [];
    afterAll(async () => {
      // The SQLite store holds its file open; the others' clients end with the test process.
      for (const store of opened) (store as { close?: () => unknown }).close?.();
      await backend.teardown();
    });

    it('is fenced out when it completes after its lease was taken over', async () => {
      const { storeModule, storeArgument } = await backend.setup();
      const factory = (await import(storeModule)) as {
        createStore(argument: unknown): Store | Promise<Store>;
      };
      const store = await factory.createStore(storeArgument);
      opened.push(store);
      const config: ZombieConfig = {
        storeModule,
        storeArgument,
        namespace: `zombie-${randomUUID()}`,
        key: `order-${randomUUID()}`,
        payload: { amount: 4200 },
        leaseMs: LEASE_MS,
      };
      const rescuer = createIdempotency({
        store,
        namespace: config.namespace,
        leaseMs: LEASE_MS,
        cache: false,
      });
      const zombie = startZombie(config);
      try {
        // Arrange: the zombie holds the key, mid-handler, and is frozen there.
        const executing = await zombie.next(['executing']);
        expect(executing.attempt).toBe(1);
        zombie.child.kill('SIGSTOP');
        // While it is frozen and its lease is live, the key is not another's to take.
        expect(
          await rescuer.run({ key: config.key, payload: config.payload }, () => 'too early'),
        ).toMatchObject({ status: 'in_progress' });
        // Its heartbeat is frozen too: the lease runs out (the store's clock decides, not the zombie's).
        await sleep(LEASE_MS + 500);

        // Act: another process's request takes the key over; while its handler runs (its claim live, so
        // only the tokens tell the two apart), the zombie wakes up, as after a paused VM or a long GC
        // pause, and finishes its handler.
        let tookOver!: () => void;
        const takenOver = new Promise<void>((resolve) => {
          tookOver = resolve;
        });
        let zombieSettled!: () => void;
        const zombieDone = new Promise<void>((resolve) => {
          zombieSettled = resolve;
        });
        const takeover = rescuer.run({ key: config.key, payload: config.payload }, async (ctx) => {
          tookOver();
          await zombieDone;
          return { by: 'rescuer', attempt: ctx.attempt };
        });
        await takenOver;
        zombie.child.kill('SIGCONT');
        zombie.child.send('finish');
        const zombieEnd = await zombie.next(['resolved', 'rejected']);
        zombieSettled();
        const rescued = await takeover;
        expect(rescued).toMatchObject({
          status: 'executed',
          value: { by: 'rescuer', attempt: 2 },
          attempt: 2,
        });
        if (rescued.status !== 'executed') throw new Error('no takeover');
        expect(rescued.token).toBeGreaterThan(executing.token);

        // Assert: the zombie made its effect, but its completion was refused by its token.
        expect(zombieEnd).toEqual({
          type: 'rejected',
          name: 'LeaseLostError',
          code: 'lease_lost',
        });
        // The loss is reported once, by whichever noticed first once thawed: the overdue heartbeat's
        // extension or the completion.
        expect(zombie.messages.filter((m) => m.type === 'lease-lost')).toHaveLength(1);
        expect(zombie.messages.filter((m) => m.type !== 'lease-lost').map((m) => m.type)).toEqual([
          'executing',
          'side-effect',
          'rejected',
        ]);
        // The record is the takeover's, and it is what every later request gets.
        const record = await store.get(rescuer.storageKeyFor(config.key));
        expect(record).toMatchObject({ status: RecordStatus.Completed, token: rescued.token });
        expect(
          await rescuer.run({ key: config.key, payload: config.payload }, () => 'never'),
        ).toEqual({ status: 'replayed', value: { by: 'rescuer', attempt: 2 } });
      } finally {
        zombie.child.kill('SIGCONT');
        zombie.child.kill('SIGKILL');
      }
    });
  });
}
