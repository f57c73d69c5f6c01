import { describe, expect, it } from 'vitest';
import { inspectionJson, inspectionLines, span, statsLines } from '../../../src/cli/key-report.js';
import { encodeErrorOutcome, encodeValueOutcome } from '../../../src/core/outcome.js';
import type { KeyInspection } from '../../../src/index.js';
import { crashedInspection } from '../../helpers/inspections.js';

const now = Date.parse('2026-11-25T12:00:00.000Z');
const key = 'a'.repeat(64);

/** A completed key whose outcome is `outcome`, kept for a day. */
function completedKey(outcome: Uint8Array): KeyInspection {
  return {
    storageKey: key,
    state: 'completed',
    now,
    source: 'inspect',
    record: {
      status: 'completed',
      fingerprint: 'fp',
      token: 7,
      outcome,
      completedAt: now - 1000,
      expiresAt: now + 86_400_000,
    },
  };
}

describe('span', () => {
  it.each([
    [850, '850 ms'],
    [12_400, '12 s'],
    [5 * 60_000, '5 min'],
    [200 * 60_000, '3 h 20 min'],
    [52 * 3_600_000, '2 d 4 h'],
  ])('prints %d ms as %s', (ms, text) => {
    expect(span(ms)).toBe(text);
  });
});

describe('inspectionLines', () => {
  it('says a crashed request’s key is reserved for it, and what another request gets', () => {
    const inspection = crashedInspection(key, now);
    expect(inspectionLines(inspection)).toEqual([
      `${key}: crashed`,
      '  lease ended  2026-11-25T11:59:50.000Z (10 s ago) with no completion: its holder died or hung',
      '  reserved     for its own request until 2026-11-25T13:00:00.000Z (in 60 min)',
      '  next request the same request takes the key over (attempt 2), resuming after its recorded steps;',
      '               another request with this key gets a mismatch (HTTP 422 key_mismatch) until then',
      '  fingerprint  fp',
      '  token        7',
      '  attempt      1',
      '  created      2026-11-25T11:59:20.000Z',
      '  steps        charge (3 bytes)',
    ]);
  });

  it('gives an in-progress key’s Retry-After, and a completed key’s outcome', () => {
    const held = inspectionLines({
      storageKey: key,
      state: 'in_progress',
      now,
      source: 'inspect',
      record: {
        status: 'in_progress',
        fingerprint: 'fp',
        token: 7,
        attempt: 2,
        createdAt: now,
        leaseUntil: now + 20_500,
      },
    });
    expect(held).toContain(
      '  next request a duplicate waits: HTTP 409 with Retry-After 21 s, consumers redeliver later;',
    );
    expect(held).toContain('  steps        none recorded');
    const completed = (outcome: Uint8Array) => inspectionLines(completedKey(outcome));
    expect(completed(encodeValueOutcome(Buffer.from('{"ok":true}')))).toContain(
      '  outcome      11 bytes',
    );
    expect(completed(encodeErrorOutcome(new TypeError('declined')))).toContain(
      '  outcome      a stored error (TypeError: declined), replayed to every retry',
    );
    expect(completed(Uint8Array.of(99))).toContain(
      "  outcome      1 bytes (not in this version's envelope)",
    );
  });

  it('says an absent key runs, and warns when the store could not show a reservation', () => {
    expect(inspectionLines({ storageKey: key, state: 'absent', now, source: 'inspect' })).toEqual([
      `${key}: absent — no record; the next request with this key runs`,
    ]);
    expect(inspectionLines({ storageKey: key, state: 'absent', now, source: 'get' })[0]).toMatch(
      /cannot show a crashed request/,
    );
  });
});

describe('inspectionJson and statsLines', () => {
  it('prints bytes as base64 in JSON', () => {
    const json = inspectionJson(completedKey(Uint8Array.of(0, 255)));
    expect(JSON.parse(json)).toMatchObject({ record: { outcome: 'AP8=' }, state: 'completed' });
  });

  it('prints counts and the oldest lease', () => {
    const lines = statsLines('public.idempotency_records', {
      inProgress: 2,
      completed: 10,
      staleLeases: 1,
      oldestLeaseAgeMs: 90_000,
    });
    expect(lines).toContain(
      '  stale leases       1 (holders that died or hung; reserved for their request, or awaiting purge)',
    );
    expect(lines).toContain('  oldest live lease  90 s');
  });
});
