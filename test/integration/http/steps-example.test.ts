/** examples/steps-express.ts keeps working: run it as a user would and read what it prints. */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

describe('examples/steps-express.ts', () => {
  it('resumes the crashed order after its recorded charge: one charge, 422 for another order', () => {
    const output = execFileSync(
      process.execPath,
      ['--import', 'tsx', 'examples/steps-express.ts'],
      {
        encoding: 'utf8',
        timeout: 30_000,
      },
    );
    expect(output).toMatch(/first request\s+→ no answer/);
    expect(output).toMatch(/retry while the lease holds → 409/);
    expect(output).toMatch(/same key, other order\s+→ 422 key_mismatch/);
    expect(output).toMatch(
      /inspect the key\s+→ crashed, reserved for its request, steps: charge\n/,
    );
    expect(output).toMatch(/list the crashed keys\s+→ that key\n/);
    expect(output).toMatch(/crashed keys after it\s+→ 0\n/);
    expect(output).toMatch(
      /retry after the lease\s+→ 201 .*"id":"ch_1".*"tracking":"TRK-ch_1".*"attempt":2/,
    );
    expect(output).toMatch(/and again\s+→ 201 \(replayed: true\)/);
    expect(output).toContain('provider calls: 1, charges: 1');
  });
});
