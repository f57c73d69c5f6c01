/**
 * The CLI piped into a reader that stops early (`| head`), against a real PostgreSQL: it ends its output
 * quietly with the command's exit code, never an EPIPE stack trace.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresStore } from '../../../src/postgres/index.js';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';
import { crashAfterCharge } from '../../helpers/crashed-request.js';
import { env, requireService } from '../../helpers/env.js';
import { testPool, uniqueSchema } from '../../helpers/postgres-env.js';

const main = fileURLToPath(new URL('../../../src/cli/main.ts', import.meta.url));
const pool = testPool();
const schema = uniqueSchema('clipipe');
let inspect: string[] = [];

// A crashed request's key, as in the report: `inspect` explains it in about ten lines.
beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
  const migrated = await cli(['migrate', '--database-url', env.databaseUrl, '--schema', schema]);
  expect(migrated.code).toBe(0);
  const { storageKey } = await crashAfterCharge(postgresStore({ pool, schema }));
  inspect = ['inspect', storageKey, '--database-url', env.databaseUrl, '--schema', schema];
});

afterAll(async () => {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

/**
 * Run `idempotency-kit ...args <then>` in bash (`then` a pipe into a reader, or a redirection); resolve to
 * the CLI's exit code (PIPESTATUS) and what it wrote to stderr. With `| true`, the pipe is closed before
 * the CLI has started, so its writes meet a closed pipe every time.
 */
function shell(args: string[], then: string): Promise<{ code: number; stderr: string }> {
  const script = `node --import tsx "$0" "$@" ${then}; exit "\${PIPESTATUS[0]}"`;
  return new Promise((resolve) => {
    const options = { timeout: 60_000 };
    execFile('bash', ['-c', script, main, ...args], options, (error, _stdout, stderr) => {
      resolve({ code: error === null ? 0 : Number(error.code), stderr });
    });
  });
}

describe('idempotency-kit piped into a reader that stops early', () => {
  it('inspect exits 0 with nothing on stderr when the reader has gone before the first line', async () => {
    // Arrange: unpiped, the command prints its report whole.
    expect((await cli(inspect)).stdout).toMatch(/: crashed\n[\s\S]*\n {2}steps {8}charge/);

    // Act
    const run = await shell(inspect, '| true');

    // Assert
    expect(run).toEqual({ code: 0, stderr: '' });
  });

  it('inspect exits 0 under head -n 1, and --help under true', async () => {
    // Act
    const runs = await Promise.all([shell(inspect, '| head -n 1'), shell(['--help'], '| true')]);

    // Assert
    expect(runs).toEqual([
      { code: 0, stderr: '' },
      { code: 0, stderr: '' },
    ]);
  });

  it('still fails, saying so, when the output cannot be written for another reason (a full disk)', async () => {
    // Act: /dev/full refuses every write with ENOSPC.
    const run = await shell(['--help'], '> /dev/full');

    // Assert
    expect(run).toEqual({
      code: 1,
      stderr: 'idempotency-kit: cannot write the output: ENOSPC: no space left on device, write\n',
    });
  });
});
