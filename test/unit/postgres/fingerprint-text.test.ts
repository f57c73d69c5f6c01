import { describe, expect, it } from 'vitest';
import { RecordStatus } from '../../../src/index.js';
import {
  storedFingerprint,
  withRequestFingerprint,
} from '../../../src/postgres/fingerprint-text.js';

const blocking = (fingerprint: string) =>
  ({
    claimed: false,
    record: {
      status: RecordStatus.InProgress,
      fingerprint,
      token: 1,
      leaseUntil: 2,
      attempt: 1,
      createdAt: 0,
    },
  }) as const;

describe('storedFingerprint', () => {
  it('keeps what text holds, a paired surrogate included, and digests the rest apart', () => {
    expect(storedFingerprint('abc')).toBe('abc');
    expect(storedFingerprint('😀 é')).toBe('😀 é');
    expect(storedFingerprint('')).toBe('');
    const nul = storedFingerprint('a\u0000b');
    const lone = storedFingerprint('a\ud800b');
    const otherLone = storedFingerprint('a\udc00b');
    expect(nul).toMatch(/^ik-fp:sha256:[0-9a-f]{64}$/);
    expect(new Set([nul, lone, otherLone, storedFingerprint('a\u0000c')]).size).toBe(4);
    expect(storedFingerprint('a\u0000b')).toBe(nul);
  });
});

describe('withRequestFingerprint', () => {
  it('gives the same request its own fingerprint back, and leaves another request’s record alone', () => {
    const fingerprint = 'a\u0000b';
    const stored = storedFingerprint(fingerprint);
    expect(withRequestFingerprint(blocking(stored), fingerprint)).toEqual(blocking(fingerprint));
    expect(withRequestFingerprint(blocking(stored), 'a\u0000c')).toEqual(blocking(stored));
    expect(withRequestFingerprint(blocking('plain'), 'plain')).toEqual(blocking('plain'));
    const claimed = { claimed: true, token: 1, attempt: 1, leaseUntil: 2 } as const;
    expect(withRequestFingerprint(claimed, fingerprint)).toBe(claimed);
  });
});
