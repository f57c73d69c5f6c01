/**
 * Running the cross-process claim storm the way a store's author does: the factory named by a relative
 * path or by the `.js` name a TypeScript project imports it under, a factory that fails or never gets
 * ready, a runner that dies mid-storm. Whatever happens, no storm process is left running, and no failure
 * escapes as an unhandled rejection.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { factoryModule } from '../../../src/testing/factory-module.js';
import { runClaimStorm } from '../../../src/testing/index.js';

const factory = fileURLToPath(new URL('./fixtures/storm-factory.ts', import.meta.url));
const keys = ['k1', 'k2', 'k3'];
const dirs: string[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ik-storm-'));
  dirs.push(dir);
  return dir;
}

/** Whether the process `pid` still runs. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The pids the factory's processes wrote in `dir`, once `count` of them have. */
async function pidsIn(dir: string, count: number): Promise<number[]> {
  // Up to 30 s: a process started through tsx took 10–12 s to run its factory at load 10 on 2 cores.
  for (let i = 0; i < 600; i++) {
    const pids = readdirSync(dir).map(Number);
    if (pids.length >= count) return pids;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no ${count} storm processes started`);
}

/** Wait until none of `pids` runs, for up to `ms`; the ones still running. */
async function survivors(pids: number[], ms: number): Promise<number[]> {
  const until = Date.now() + ms;
  while (Date.now() < until && pids.some(alive)) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const left = pids.filter(alive);
  for (const pid of left) process.kill(pid, 'SIGKILL');
  return left;
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

// Each storm starts processes through tsx (seconds each, 10–12 s on a loaded machine), one waits out its
// 12 s `timeoutMs`, and `pidsIn` and `survivors` wait up to 33 s: Vitest's default 5 s is too short.
describe('runClaimStorm', { timeout: 60_000 }, () => {
  it('takes the factory module as a path relative to the working directory', async () => {
    const result = await runClaimStorm(
      { module: relative(process.cwd(), factory), processes: 2, claimsPerProcess: 6 },
      keys,
    );
    expect(result.errors).toEqual([]);
    expect(result.totalClaims).toBe(12);
  });

  it('reads the .js name of a TypeScript factory as its .ts file, and loads it through tsx', () => {
    const named = factoryModule(new URL('./fixtures/storm-factory.js', import.meta.url));
    expect(named).toEqual({ href: new URL(`file://${factory}`).href, typescript: true });
    expect(factoryModule(factory).typescript).toBe(true);
    const spaced = factoryModule('/tmp/my store #2/factory.mjs');
    expect(fileURLToPath(spaced.href)).toBe('/tmp/my store #2/factory.mjs');
    expect(spaced.typescript).toBe(false);
  });

  it('fails, kills its processes and leaves no unhandled rejection when a factory cannot load', async () => {
    const unhandled: unknown[] = [];
    const record = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', record);
    try {
      await expect(
        runClaimStorm({ module: join(tempDir(), 'missing-factory.mjs'), processes: 3 }, keys),
      ).rejects.toThrow(/before its store was ready/);
      // The other processes are killed after the first failure: their exits come a moment later.
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      process.off('unhandledRejection', record);
    }
    expect(unhandled).toEqual([]);
  });

  it('gives up on stores that never get ready within timeoutMs, and kills their processes', async () => {
    const pidDir = tempDir();
    const storm = runClaimStorm(
      // Long enough for both processes to start and write their pids, on a loaded machine too.
      { module: factory, argument: { pidDir, hang: true }, processes: 2, timeoutMs: 12_000 },
      keys,
    );
    await expect(storm).rejects.toThrow(/did not finish within 12000 ms/);
    expect(await survivors(await pidsIn(pidDir, 2), 2_000)).toEqual([]);
  });

  it('leaves no process running when the runner dies mid-storm', async () => {
    const pidDir = tempDir();
    const runner = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        fileURLToPath(new URL('./fixtures/storm-runner.ts', import.meta.url)),
        pidDir,
      ],
      { stdio: 'inherit' },
    );
    const pids = await pidsIn(pidDir, 2);
    runner.kill('SIGKILL');
    expect(await survivors(pids, 3_000)).toEqual([]);
  });
});
