import { describe, expect, it } from 'vitest';
import { crashedPageJson, crashedPageLines } from '../../../src/cli/crashed-report.js';
import { inspectionLines } from '../../../src/cli/key-report.js';
import type { KeyInspection } from '../../../src/index.js';
import { crashedInspection } from '../../helpers/inspections.js';

const now = Date.parse('2026-11-25T12:00:00.000Z');
const target = 'public.idempotency_records (postgres)';

const crashedKey = (storageKey: string): KeyInspection => crashedInspection(storageKey, now);

describe('crashedPageLines', () => {
  it('explains each key as inspect does, then says how to read the next page', () => {
    const [a, b] = [crashedKey('a'.repeat(64)), crashedKey('b'.repeat(64))];
    expect(crashedPageLines(target, { keys: [a, b], next: 'b'.repeat(64) })).toEqual([
      `${target}: crashed keys, each reserved for its own request`,
      '',
      ...inspectionLines(a),
      '',
      ...inspectionLines(b),
      '',
      `2 crashed keys on this page; next page: run again with --after ${'b'.repeat(64)}`,
    ]);
  });

  it('says when the listing is complete, or found nothing', () => {
    expect(crashedPageLines(target, { keys: [crashedKey('k')] }).at(-1)).toBe(
      '1 crashed key, no more',
    );
    expect(crashedPageLines(target, { keys: [] })).toEqual([
      `${target}: crashed keys, each reserved for its own request`,
      '',
      'no crashed keys',
    ]);
    // Redis: a SCAN position to go on from, though this page found none.
    expect(crashedPageLines(target, { keys: [], next: '0:96' }).at(-1)).toBe(
      'no crashed keys on this page; next page: run again with --after 0:96',
    );
  });
});

describe('crashedPageJson', () => {
  it('prints one object: the store, the target, each key as inspect --json does, and next', () => {
    const parsed = JSON.parse(
      crashedPageJson('postgres', 'public.t', { keys: [crashedKey('k')], next: 'k' }),
    );
    expect(parsed).toEqual({
      store: 'postgres',
      target: 'public.t',
      next: 'k',
      keys: [
        {
          storageKey: 'k',
          state: 'crashed',
          now,
          source: 'inspect',
          record: expect.objectContaining({ leaseUntil: now - 10_000, steps: { charge: 'AQID' } }),
        },
      ],
    });
    expect(JSON.parse(crashedPageJson('sqlite', 'f', { keys: [] }))).toEqual({
      store: 'sqlite',
      target: 'f',
      keys: [],
    });
  });
});
