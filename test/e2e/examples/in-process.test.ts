/**
 * The examples that need no server (SQLite files, the memory store) keep doing what their docs say: each
 * runs as a real process, as `npx tsx examples/<name>.ts` (or `npm run demo`) would, and its output is read.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { assertExitedCleanly, runExample } from '../../helpers/run-example.js';

/** Run `file` in a working directory of this test's own (`npm run demo` writes `.data/` there). */
async function run(file: string): Promise<string> {
  const result = await runExample(file, { cwd: dir });
  assertExitedCleanly(file, result);
  return result.stdout;
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ik-exs-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('examples without a server', () => {
  it('demo-sqlite.ts (`npm run demo`): executed, replayed, in_progress and mismatch; 2 charges for 5 requests', async () => {
    const output = await run('demo-sqlite.ts');
    const first = /POST order-1 \(first time\) +→ executed +(\{"chargeId":"ch_1".*\})\n/.exec(
      output,
    );
    expect(first, output).not.toBeNull();
    const retry = /POST order-1 again \(client retry\) +→ replayed +(.*)\n/.exec(output);
    expect(retry?.[1], output).toBe(first?.[1]);
    expect(output).toMatch(
      /POST order-2 while the first is running +→ in_progress retry after \d+ ms\n/,
    );
    expect(output).toMatch(/POST order-2 \(the first call\) +→ executed +\{"chargeId":"ch_2"/);
    expect(output).toMatch(
      /POST order-1 with a different amount +→ mismatch +this key was used for a different request\n/,
    );
    expect(output).toContain('The card was charged 2 times for 2 orders and 5 requests.');
    expect(output).toMatch(/Records in the store: \{"inProgress":0,"completed":2,/);
    // The file is where the demo says, under the working directory.
    expect(readdirSync(join(dir, '.data'))).toContain('demo.db');
  });

  it('fetch-sqlite.ts: one execution, a replay, 422; the upload retried with a new boundary is replayed', async () => {
    const output = await run('fetch-sqlite.ts');
    const lines = output.split('\n');
    const charged = /^201 - (\{"charged":4200,"providerKey":"ik_[0-9a-f]+"\})$/.exec(
      lines[0] ?? '',
    );
    expect(charged, output).not.toBeNull();
    expect(lines[1]).toBe(`201 true ${charged?.[1]}`);
    expect(lines[2]).toMatch(/^422 - \{.*"code":"key_mismatch"/);
    expect(lines[3]).toBe('handler ran 1 time(s)');
    expect(lines.slice(4, 8)).toEqual([
      '201 -',
      '201 true',
      '422 -',
      'upload handler ran 1 time(s)',
    ]);
  });

  it('hono-memory.ts: a replay with the CORS headers exposed, the key deep in the call tree, 400 without a key', async () => {
    const output = await run('hono-memory.ts');
    const lines = output.split('\n');
    const created =
      /^201 - X-Request-Id (\{"id":"ord_1","sku":"book","key":"order-1","messageId":"ik_[0-9a-f]+"\})$/.exec(
        lines[0] ?? '',
      );
    expect(created, output).not.toBeNull();
    expect(lines[1]).toBe(`201 true X-Request-Id, Idempotent-Replayed ${created?.[1]}`);
    expect(lines[2]).toMatch(/^400 - X-Request-Id, Link \{.*"code":"missing_key"/);
    expect(lines[3]).toBe('handler ran 1 time(s)');
  });

  it('sqlite-store.ts: the second run() replays the first charge', async () => {
    const output = await run('sqlite-store.ts');
    expect(output).toMatch(/attempt 1: executed \{\n {2}id: 'ch_1',[^}]*\} \(token \d+\)\n/);
    expect(output).toMatch(/attempt 2: replayed \{\n {2}id: 'ch_1',/);
    expect(output).toContain('charges made: 1\n');
  });

  it('sqlite-transactional.ts: replay, mismatch, rollback, the engine sees the record; 2 payments, 2 messages', async () => {
    const output = await run('sqlite-transactional.ts');
    expect(output).toMatch(/attempt 1: executed \{\n {2}id: 1,[^}]*\} \(token \d+\)\n/);
    expect(output).toMatch(/attempt 2: replayed \{\n {2}id: 1,/);
    expect(output).toContain('other amount: mismatch\n');
    expect(output).toContain('rolled back: validation failed after the insert\n');
    expect(output).toContain('after the rollback: executed\n');
    expect(output).toContain('engine: replayed\n');
    expect(output).toContain('rows: { payments: 2, messages: 2 }\n');
  });
});
