/**
 * `idempotency-kit migrate --sqlite` on a table a newer release migrated further: the command says so
 * (the table, its version, the newer migrations) instead of "is up to date", as a warning on stderr, and
 * exits 0 having changed nothing, as `migrate` on PostgreSQL does. It used to print "is up to date", the
 * warning dropped; then it printed the warning on stdout, where a deploy script that keeps or parses the
 * report hid it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { migrations } from '../../../src/sqlite/migrations.gen.js';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';

const VERSION = migrations[migrations.length - 1]!.id;
const dir = mkdtempSync(join(tmpdir(), 'ik-cli-sqlite-ahead-'));

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('idempotency-kit migrate --sqlite on a table ahead of this release', () => {
  it('warns on stderr instead of saying "up to date", exit 0, and changes nothing', async () => {
    // Arrange: migrated by this release, then by a newer one
    const file = join(dir, 'ahead.db');
    expect(await cli(['migrate', '--sqlite', file, '--table', 'orders'])).toMatchObject({
      code: 0,
    });
    const db = new Database(file);
    db.prepare('INSERT INTO orders_migrations (id, name, applied_at) VALUES (?, ?, 0)').run(
      VERSION + 1,
      `000${VERSION + 1}_from_the_future`,
    );
    const before = db.prepare('SELECT id, name FROM orders_migrations ORDER BY id').all();
    db.close();
    // Act
    const result = await cli(['migrate', '--sqlite', file, '--table', 'orders']);
    // Assert
    expect(result).toMatchObject({ code: 0, stdout: '' });
    expect(result.stderr).toBe(
      `idempotency-kit migrate: warning: ${file}: orders is at version ${VERSION + 1}, newer than this release knows (${VERSION}): a ` +
        `newer release applied 000${VERSION + 1}_from_the_future. Nothing was applied or undone; this ` +
        'release runs on it as long as those migrations keep older code working (see their release notes)\n',
    );
    const after = new Database(file, { readonly: true });
    expect(after.prepare('SELECT id, name FROM orders_migrations ORDER BY id').all()).toEqual(
      before,
    );
    after.close();
  });

  it('still says "up to date" on a current table', async () => {
    const file = join(dir, 'current.db');
    await cli(['migrate', '--sqlite', file]);
    expect(await cli(['migrate', '--sqlite', file])).toMatchObject({
      code: 0,
      stdout: `${file} (idempotency_records) is up to date\n`,
    });
  });
});
