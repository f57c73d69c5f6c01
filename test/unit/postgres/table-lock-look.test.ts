import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { PgQueryable } from '../../../src/postgres/client.js';
import { tableNames } from '../../../src/postgres/identifiers.js';
import { tableLockBlocks } from '../../../src/postgres/table-lock.js';

/** A client that counts its queries and answers `blocked` after a moment (or fails). */
function counting(blocked: boolean, fail = false): PgQueryable & { count: number } {
  const db = {
    count: 0,
    async query() {
      db.count++;
      await sleep(5);
      if (fail) throw new Error('connection lost');
      return { rows: [{ blocked }], rowCount: 1 };
    },
  };
  return db;
}

describe('tableLockBlocks', () => {
  it('reads pg_locks once for the callers of a moment (a storm of timed-out claims), then again once stale', async () => {
    // Arrange
    const db = counting(true);
    const names = tableNames();
    // Act
    const answers = await Promise.all(Array.from({ length: 20 }, () => tableLockBlocks(db, names)));
    const soon = await tableLockBlocks(db, names);
    await sleep(150);
    const later = await tableLockBlocks(db, names);
    // Assert
    expect(answers).toEqual(Array(20).fill(true));
    expect(soon).toBe(true);
    expect(later).toBe(true);
    expect(db.count).toBe(2);
  });

  it('keeps looks apart per table and per client, and keeps no failed look', async () => {
    // Arrange
    const db = counting(false, true);
    const other = counting(false);
    // Act
    await expect(tableLockBlocks(db, tableNames())).rejects.toThrow('connection lost');
    await expect(tableLockBlocks(db, tableNames())).rejects.toThrow('connection lost');
    await tableLockBlocks(other, tableNames());
    await tableLockBlocks(other, tableNames(undefined, 'other_records'));
    // Assert
    expect(db.count).toBe(2);
    expect(other.count).toBe(2);
  });
});
