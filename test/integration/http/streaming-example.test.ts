/** examples/hono-streaming.ts keeps working: run it as a user would and read what it prints. */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

describe('examples/hono-streaming.ts', () => {
  it('streams the events as they are written, replays them at the end, and stores the whole answer of a client that left', () => {
    const output = execFileSync(
      process.execPath,
      ['--import', 'tsx', 'examples/hono-streaming.ts'],
      { encoding: 'utf8', timeout: 30_000 },
    );
    // One line per chunk the client read: the six events came in several reads, not as one body at the
    // end (two may share a read on a busy machine).
    expect(output.match(/ received /g)?.length ?? 0).toBeGreaterThanOrEqual(3);
    expect(output).toContain('received "data: Effectively"');
    expect(output).toMatch(/retry at the end → 200 \(replayed: true, same bytes: true\)/);
    expect(output).toMatch(/retry after leaving → 200 \(replayed: true, events: 6\)/);
    expect(output).toContain('generations: 2');
  });
});
