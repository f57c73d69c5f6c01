import { describe, expect, it } from 'vitest';
import { decodeClaim, decodeFlag, decodeGet } from '../../../src/redis/replies.js';

const b = (text: string) => Buffer.from(text);

describe('redis script replies', () => {
  it('decodes a won claim from integer replies', () => {
    // Arrange
    const reply = [1, 1_700_000_000_000_123, 2, 1_700_000_030_000];
    // Act
    const result = decodeClaim(reply);
    // Assert
    expect(result).toEqual({
      claimed: true,
      token: 1_700_000_000_000_123,
      attempt: 2,
      leaseUntil: 1_700_000_030_000,
    });
  });

  it('decodes a blocking in-progress record from buffer replies', () => {
    // Arrange
    const reply = [
      0,
      b('in_progress'),
      b('fp'),
      b('1700000000000123'),
      b('1700000030000'),
      b('1'),
      b('1700000000000'),
    ];
    // Act
    const result = decodeClaim(reply);
    // Assert
    expect(result).toEqual({
      claimed: false,
      record: {
        status: 'in_progress',
        fingerprint: 'fp',
        token: 1_700_000_000_000_123,
        leaseUntil: 1_700_000_030_000,
        attempt: 1,
        createdAt: 1_700_000_000_000,
      },
    });
  });

  it('keeps a completed outcome byte-exact, including bytes that are not valid UTF-8', () => {
    // Arrange
    const bytes = Buffer.from([0, 0xff, 0xfe, 0x80, 10]);
    const reply = [0, b('completed'), b('fp'), b('42'), bytes, b('1000'), b('2000')];
    // Act
    const record = decodeGet(reply);
    // Assert
    expect(record?.status).toBe('completed');
    if (record?.status === 'completed') {
      expect([...record.outcome]).toEqual([0, 0xff, 0xfe, 0x80, 10]);
      expect(record.outcome).not.toBe(bytes);
      expect(record.expiresAt).toBe(2000);
    }
  });

  it('reads an empty reply from get as no record', () => {
    // Arrange + Act
    const record = decodeGet([]);
    // Assert
    expect(record).toBeUndefined();
  });

  it('reads 1 and 0 as the compare-and-set result', () => {
    // Arrange + Act + Assert
    expect(decodeFlag(1)).toBe(true);
    expect(decodeFlag(0)).toBe(false);
  });

  it('rejects malformed replies instead of inventing a record', () => {
    // Arrange + Act + Assert
    expect(() => decodeClaim('OK')).toThrow(/unexpected Redis reply/);
    expect(() => decodeGet([0, b('weird'), b('fp'), b('1')])).toThrow(/status/);
    expect(() => decodeClaim([1, b('1.5'), 1, 1])).toThrow(/number/);
  });
});
