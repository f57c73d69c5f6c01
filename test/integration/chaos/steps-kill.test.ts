/**
 * kill -9 of a payments handler between its steps, on every shared store (SQLite file, Redis, PostgreSQL):
 * `charge` then `ship`, each step's effect appended to a file. A process killed after the charge's effect
 * but before its recording (the window docs/concepts.md states) charges again on the retry, with the same
 * downstream key; a process killed after the charge was recorded never charges again: the retry that takes
 * it over replays the recorded charge and only ships. Real processes, real SIGKILL, real servers.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { helperPath as helper, sharedStoreBackends } from '../../helpers/shared-store-backends.js';
import type { StepEffect, StepsKillConfig, StepsKillStop } from '../../helpers/steps-kill-child.js';

const LEASE_MS = 1500;

const backends = sharedStoreBackends('steps-kill');
const dir = mkdtempSync(join(tmpdir(), 'ik-steps-kill-'));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Run the child until it stops (then kill it with SIGKILL) or reports its outcome. */
async function runChild(
  base: Omit<StepsKillConfig, 'stop'>,
  stop: StepsKillStop,
): Promise<{ pid: number; outcome?: unknown }> {
  const child: ChildProcess = fork(helper('steps-kill-child.ts'), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, IK_STEPS_KILL: JSON.stringify({ ...base, stop }) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.once('exit', (_code, signal) => resolve(signal)),
  );
  const message = await new Promise<{ type: string; outcome?: unknown; error?: string }>(
    (resolve, reject) => {
      child.once('message', resolve);
      child.once('exit', () => reject(new Error('the child exited without a word')));
      setTimeout(() => reject(new Error('the child never reported')), 30_000).unref();
    },
  );
  if (message.type === 'error') throw new Error(`the child failed: ${message.error}`);
  if (message.type === 'stopped') {
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    return { pid: child.pid as number };
  }
  await exited;
  return { pid: child.pid as number, outcome: message.outcome };
}

for (const backend of backends) {
  describe(`steps under kill -9 on ${backend.name}`, () => {
    afterAll(() => backend.teardown());

    it('never charges again once the charge is recorded; a repeat in the window keeps its downstream key', async () => {
      // Arrange
      const { storeModule, storeArgument } = await backend.setup();
      const effectsFile = join(dir, `${backend.name}.jsonl`);
      const base = {
        storeModule,
        storeArgument,
        namespace: `steps-kill-${randomUUID()}`,
        key: `order-${randomUUID()}`,
        leaseMs: LEASE_MS,
        effectsFile,
      };

      // Act: killed inside the charge (effect made, not recorded), then after the charge was recorded,
      // each time left to its lease; then a retry that runs to the end.
      await runChild(base, 'in-charge');
      await sleep(LEASE_MS);
      const recorder = await runChild(base, 'after-charge');
      await sleep(LEASE_MS);
      const last = await runChild(base, 'none');

      // Assert
      const effects = readFileSync(effectsFile, 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as StepEffect);
      const charges = effects.filter((e) => e.step === 'charge');
      const ships = effects.filter((e) => e.step === 'ship');
      expect(charges.map((e) => e.attempt)).toEqual([1, 2]);
      expect(new Set(charges.map((e) => e.downstreamKey)).size).toBe(1);
      expect(ships).toHaveLength(1);
      expect(ships[0]?.pid).toBe(last.pid);
      expect(last.outcome).toMatchObject({
        status: 'executed',
        value: {
          charge: `ch-${recorder.pid}`,
          tracking: `trk-ch-${recorder.pid}`,
          attempt: 3,
        },
      });
    });
  });
}
