/** `idempotency-kit/sqlite` loads without better-sqlite3 and names it when a file must be opened. */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

describe('sqlite driver loading', () => {
  it('imports without better-sqlite3 and names the package when the store must open a file', () => {
    // Arrange
    const child = fileURLToPath(new URL('./lazy-driver-child.ts', import.meta.url));
    // Act
    const output = execFileSync(process.execPath, ['--import', 'tsx', child], { encoding: 'utf8' });
    const result = JSON.parse(output.trim().split('\n').at(-1) ?? '{}');
    // Assert
    expect(result.imported).toBe(true);
    expect(result.loaded).toBe(false);
    expect(result.error).toMatchObject({ name: 'InvalidOptionsError', code: 'invalid_options' });
    expect(result.error.message).toMatch(/better-sqlite3 \(\^12\)/);
    expect(result.error.message).toMatch(/npm install better-sqlite3/);
  });
});
