import { describe, expect, it } from 'vitest';
import { fingerprintDigest } from '../../../src/core/stored-fingerprint.js';
import {
  decodeClaim,
  decodeFlag,
  decodeFlags,
  decodeGet,
  decodeHeader,
  decodeSteps,
  decodeValue,
} from '../../../src/redis/replies.js';

const b = (text: string) => Buffer.from(text);

describe('redis record values and script replies', () => {
  it('decodes a won claim from the bare token, deriving the lease end from its millisecond', () => {
    // Arrange: the hot path returns only the token (Redis TIME in µs).
    const token = 1_790_000_000_123_456;
    // Act
    const result = decodeClaim(token, 30_000, 'fp');
    // Assert
    expect(result).toEqual({
      claimed: true,
      token,
      attempt: 1,
      leaseUntil: 1_790_000_000_123 + 30_000,
    });
  });

  it('decodes a won takeover from {token, attempt, leaseUntil}', () => {
    // Arrange
    const reply = [1_790_000_000_123_457, 2, 1_790_000_030_123];
    // Act
    const result = decodeClaim(reply, 30_000, 'fp');
    // Assert
    expect(result).toEqual({
      claimed: true,
      token: 1_790_000_000_123_457,
      attempt: 2,
      leaseUntil: 1_790_000_030_123,
    });
  });

  it('decodes a blocking in-progress value, keeping a fingerprint that contains the separator', () => {
    // Arrange
    const reply = b('p|1790000000123456|1790000030123|1790000000123|3|fp|with|bars é');
    // Act
    const result = decodeClaim(reply, 30_000, 'fp');
    // Assert
    expect(result).toEqual({
      claimed: false,
      record: {
        status: 'in_progress',
        fingerprint: 'fp|with|bars é',
        token: 1_790_000_000_123_456,
        leaseUntil: 1_790_000_030_123,
        attempt: 3,
        createdAt: 1_790_000_000_123,
      },
    });
  });

  it('keeps a completed outcome byte-exact, including bytes that are not valid UTF-8', () => {
    // Arrange: the fingerprint length is in bytes ('é' is two).
    const outcome = Buffer.from([0, 0x7c, 0xff, 0xfe, 0x80, 10]);
    const value = Buffer.concat([b('c|42|1000|2000|4|fé|'), outcome]);
    // Act
    const record = decodeGet(value);
    // Assert
    expect(record?.status).toBe('completed');
    if (record?.status === 'completed') {
      expect(record.fingerprint).toBe('fé|');
      expect([...record.outcome]).toEqual([...outcome]);
      expect(record.outcome.buffer).not.toBe(value.buffer);
      expect(record).toMatchObject({ token: 42, completedAt: 1000, expiresAt: 2000 });
    }
  });

  it('reads a nil reply from get, and a tombstone, as no record', () => {
    // Arrange + Act + Assert
    expect(decodeGet(null)).toBeUndefined();
    expect(decodeValue(b('r|1790000000123456'))).toBeUndefined();
  });

  it('reads 1 and 0 as the compare-and-set result, and batches item by item', () => {
    // Arrange + Act + Assert
    expect(decodeFlag(1)).toBe(true);
    expect(decodeFlag(0)).toBe(false);
    expect(decodeFlags([1, 0, 1], 3)).toEqual([true, false, true]);
    expect(() => decodeFlags([1, 0], 3)).toThrow(/expected 3 results/);
  });

  it('reads the header of a value for stats, without its fingerprint or outcome', () => {
    // Arrange + Act + Assert
    expect(decodeHeader(b('p|1790000000123456|1790000030123|1790000000123|1|f'))).toEqual({
      status: 'in_progress',
      liveUntil: 1_790_000_030_123,
      since: 1_790_000_000_123,
    });
    expect(decodeHeader(b('c|42|1000|2000|2|fpxyz'))).toEqual({
      status: 'completed',
      liveUntil: 2000,
      since: 1000,
    });
    expect(decodeHeader(b('r|42'))).toBeUndefined();
  });

  it("gives a blocking record holding the digest of the claim's fingerprint the claim's own", () => {
    // Arrange: a fingerprint with a lone surrogate is stored as its digest (UTF-8 has no form for it).
    const lone = 'amount=1 memo=\ud800';
    const value = `p|1790000000123456|1790000030123|1790000000123|1|${fingerprintDigest(lone)}`;
    // Act
    const same = decodeClaim(b(value), 30_000, lone);
    const other = decodeClaim(b(value), 30_000, 'amount=1 memo=\udc00');
    // Assert
    expect(same).toMatchObject({ claimed: false, record: { fingerprint: lone } });
    expect(other).toMatchObject({
      claimed: false,
      record: { fingerprint: fingerprintDigest(lone) },
    });
  });

  it('rejects malformed replies instead of inventing a record', () => {
    // Arrange + Act + Assert
    expect(() => decodeClaim({}, 1000, 'fp')).toThrow(/unexpected Redis reply/);
    expect(() => decodeClaim(b('r|42'), 1000, 'fp')).toThrow(/tombstone/);
    expect(() => decodeValue(b('x|1|2|3|4|fp'))).toThrow(/status/);
    expect(() => decodeValue(b('p|1.5|2|3|1|fp'))).toThrow(/malformed/);
    expect(() => decodeValue(b('c|1|2|3|99|short'))).toThrow(/malformed/);
    expect(() => decodeClaim(1.5, 1000, 'fp')).toThrow(/number/);
  });

  it('decodes load-steps: nil when fenced out, names and byte-exact copies of the results', () => {
    // Arrange
    const read = Buffer.from([0, 1, 0xff, 0x7c]);
    const reply = [b('charge'), read, b('__proto__'), b('p')];
    // Act
    const steps = decodeSteps(reply);
    read[0] = 9;
    // Assert: the results are copies; every name is an own property, `__proto__` included.
    expect(decodeSteps(null)).toBeUndefined();
    expect(decodeSteps([])).toEqual({});
    expect(Object.getPrototypeOf(decodeSteps([]))).toBe(Object.prototype);
    expect(steps?.charge).toEqual(Uint8Array.of(0, 1, 0xff, 0x7c));
    expect(Object.keys(steps ?? {})).toEqual(['charge', '__proto__']);
    expect(Object.getPrototypeOf(steps)).toBe(Object.prototype);
    expect(() => decodeSteps([b('odd')])).toThrow(/step names and results/);
  });
});
