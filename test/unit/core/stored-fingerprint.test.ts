import { describe, expect, it } from 'vitest';
import {
  comparableFingerprint,
  fingerprintDigest,
  utf8StoredFingerprint,
} from '../../../src/core/stored-fingerprint.js';
import { hasLoneSurrogate, textFlaw } from '../../../src/core/text-flaw.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { storedFingerprint as postgresStoredFingerprint } from '../../../src/postgres/fingerprint-text.js';

const LONE = 'amount=100 memo=\ud83d';
const OTHER_LONE = 'amount=100 memo=\udc00';

describe('utf8StoredFingerprint', () => {
  it('keeps every fingerprint UTF-8 can hold as it is, a NUL included', () => {
    // Arrange
    const kept = ['', 'f'.repeat(64), 'a\u0000b', '😀 é', '\ud83d\ude00', 'ik-fp:sha256:00'];
    // Act + Assert
    for (const fingerprint of kept) expect(utf8StoredFingerprint(fingerprint)).toBe(fingerprint);
  });

  it("stores one with a lone surrogate as the PostgreSQL store's digest, distinct per fingerprint", () => {
    // Arrange
    const flawed = [
      LONE,
      OTHER_LONE,
      '\ude00\ud83d',
      'a\u0000\ud800',
      'amount=100 memo=\ufffd\ud800',
    ];
    // Act
    const stored = flawed.map(utf8StoredFingerprint);
    // Assert
    for (const [i, fingerprint] of flawed.entries()) {
      expect(stored[i]).toBe(fingerprintDigest(fingerprint));
      expect(stored[i]).toBe(postgresStoredFingerprint(fingerprint));
      expect(stored[i]).toMatch(/^ik-fp:sha256:[0-9a-f]{64}$/);
    }
    expect(new Set(stored).size).toBe(flawed.length);
  });
});

describe('hasLoneSurrogate', () => {
  it('finds a lone half that textFlaw reports after a NUL, and never a pair', () => {
    // Arrange + Act + Assert
    expect(textFlaw('a\u0000\ud800')).toBe('nul');
    expect(hasLoneSurrogate('a\u0000\ud800')).toBe(true);
    expect(hasLoneSurrogate('\ud83d\ude00')).toBe(false);
    expect(hasLoneSurrogate('a\u0000b')).toBe(false);
  });
});

describe('comparableFingerprint', () => {
  it("gives the request's own fingerprint for its stored form only", () => {
    // Arrange
    const stored = utf8StoredFingerprint(LONE);
    // Act + Assert
    expect(comparableFingerprint(stored, LONE)).toBe(LONE);
    expect(comparableFingerprint(stored, OTHER_LONE)).toBe(stored);
    expect(comparableFingerprint('plain', 'plain')).toBe('plain');
    expect(comparableFingerprint('plain', LONE)).toBe('plain');
    expect(comparableFingerprint(stored, 'plain')).toBe(stored);
  });
});

describe('memory store: fingerprints with a lone surrogate', () => {
  it("replays the same request's retry and refuses the other lone half (strings kept as they are)", async () => {
    // Arrange: two engines without the local cache, sharing one store.
    const store = memoryStore();
    const engine = () => createIdempotency({ store, cache: false, extendLease: false });
    const [first, second] = [engine(), engine()];
    // Act
    const executed = await first.run({ key: 'k', fingerprint: LONE }, () => 'charged');
    const retried = await second.run({ key: 'k', fingerprint: LONE }, () => 'again');
    const other = await second.run({ key: 'k', fingerprint: OTHER_LONE }, () => 'again');
    // Assert
    expect(executed.status).toBe('executed');
    expect(retried).toMatchObject({ status: 'replayed', value: 'charged' });
    expect(other.status).toBe('mismatch');
  });
});
