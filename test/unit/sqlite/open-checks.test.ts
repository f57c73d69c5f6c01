/** What `sqliteStore` and `migrate` say about a path they cannot use, before any file is written. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate, sqliteStore } from '../../../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-open-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('opening a SQLite path', () => {
  it('refuses an empty path, which SQLite would open as a temporary database, with InvalidOptionsError', () => {
    // Act / Assert
    for (const open of [() => sqliteStore({ database: '' }), () => migrate('')]) {
      expect(open).toThrow(
        expect.objectContaining({
          code: 'invalid_options',
          message: expect.stringMatching(/empty string: give a file path \(or ':memory:'/),
        }),
      );
    }
  });

  it('says which file it failed to open, in a sentence', () => {
    // Act / Assert
    const file = join(dir, 'missing', 'x.db');
    expect(() => sqliteStore({ database: file })).toThrow(
      expect.objectContaining({
        code: 'store_unavailable',
        message: expect.stringMatching(new RegExp(`^SQLite store: opening ${file} failed`)),
      }),
    );
    expect(() => sqliteStore({ database: dir })).toThrow(
      new RegExp(`^SQLite store: opening ${dir} failed \\(SQLITE_CANTOPEN\\)`),
    );
  });
});
