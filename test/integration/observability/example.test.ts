/** examples/observability-express.ts keeps working: run it as a user would and read what it prints. */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

describe('examples/observability-express.ts', () => {
  it('prints one span and one runs_total series per outcome', () => {
    const output = execFileSync(
      process.execPath,
      ['--import', 'tsx', 'examples/observability-express.ts'],
      { encoding: 'utf8', timeout: 30_000 },
    );
    expect(output).toMatch(/new order\s+→ 201/);
    expect(output).toMatch(/same key, other body\s+→ 422/);
    expect(output).toMatch(
      /idempotency_store_call_seconds_count\{store="sqlite",operation="claim",result="ok"\} [1-9]/,
    );
    for (const outcome of ['executed', 'replayed', 'mismatch', 'failed']) {
      expect(output).toContain(`idempotency.outcome=${outcome} `);
      expect(output).toContain(
        `idempotency_runs_total{namespace="orders-api",outcome="${outcome}"} 1`,
      );
    }
  });
});
