/**
 * An in-memory {@link OutboxSource} for unit tests of the relay: rows in an array, no I/O, and a log of
 * every call so tests can check what the relay asked for.
 * @module
 */
import type { OutboxMessage, OutboxSource, OutboxStats } from '../../src/outbox/index.js';

/** A stored row of the memory source. */
export interface MemoryRow {
  message: OutboxMessage;
  availableAt: number;
  attempts: number;
  lastError: string | null;
  sentAt: number | null;
}

/** The memory source, its rows and its call log. */
export interface MemorySource extends OutboxSource {
  rows: MemoryRow[];
  calls: string[];
  /** Add a row (already committed). */
  add(id: string, topic?: string): void;
}

/** Create an empty memory source; time comes from `now`. */
export function memorySource(now: () => number = Date.now): MemorySource {
  let nextRowId = 1;
  const source: MemorySource = {
    rows: [],
    calls: [],
    add(id, topic = 'test') {
      const rowId = String(nextRowId++);
      source.rows.push({
        message: {
          id,
          topic,
          key: null,
          payload: new Uint8Array(),
          contentType: 'application/octet-stream',
          headers: {},
          rowId,
          attempt: 0,
          createdAt: now(),
        },
        availableAt: now(),
        attempts: 0,
        lastError: null,
        sentAt: null,
      });
    },
    async claim(limit, leaseMs) {
      source.calls.push(`claim ${limit} ${leaseMs}`);
      const picked = source.rows
        .filter((row) => row.sentAt === null && row.availableAt <= now())
        .slice(0, limit);
      for (const row of picked) {
        row.availableAt = now() + leaseMs;
        row.attempts++;
      }
      return picked.map((row) => ({ ...row.message, attempt: row.attempts }));
    },
    async markSent(rowIds) {
      source.calls.push(`markSent ${rowIds.join(',')}`);
      let count = 0;
      for (const row of source.rows) {
        if (rowIds.includes(row.message.rowId) && row.sentAt === null) {
          row.sentAt = now();
          row.lastError = null;
          count++;
        }
      }
      return count;
    },
    async markFailed(rowId, retryInMs, error) {
      source.calls.push(`markFailed ${rowId} ${retryInMs}`);
      const row = source.rows.find((r) => r.message.rowId === rowId);
      if (row !== undefined && row.sentAt === null) {
        row.availableAt = now() + retryInMs;
        row.lastError = error;
      }
    },
    async purgeSent(retentionMs, limit) {
      const doomed = source.rows
        .filter((row) => row.sentAt !== null && row.sentAt < now() - retentionMs)
        .slice(0, limit);
      source.rows = source.rows.filter((row) => !doomed.includes(row));
      return doomed.length;
    },
    async stats(): Promise<OutboxStats> {
      const unsent = source.rows.filter((row) => row.sentAt === null);
      return {
        unsent: unsent.length,
        failing: unsent.filter((row) => row.lastError !== null).length,
        sent: source.rows.length - unsent.length,
        maxAttempts: Math.max(0, ...unsent.map((row) => row.attempts)),
        oldestUnsentAgeMs:
          unsent.length === 0
            ? null
            : now() - Math.min(...unsent.map((row) => row.message.createdAt)),
      };
    },
  };
  return source;
}
