import { describe, expect, it } from 'vitest';
import { bufferView } from '../../../src/core/bytes.js';

describe('bufferView', () => {
  it('views a Uint8Array slice without copying the wrong bytes', () => {
    // Arrange
    const bytes = Uint8Array.from([1, 2, 3, 4]).subarray(1, 3);
    // Act
    const view = bufferView(bytes);
    // Assert: exactly the slice, over the same memory.
    expect([...view]).toEqual([2, 3]);
    view[0] = 9;
    expect(bytes[0]).toBe(9);
  });

  it('hands a Buffer back as it is', () => {
    const buffer = Buffer.from([1, 2]);
    expect(bufferView(buffer)).toBe(buffer);
  });
});
