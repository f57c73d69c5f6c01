import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sources(join(dir, entry.name))
      : entry.name.endsWith('.ts')
        ? [join(dir, entry.name)]
        : [],
  );
}

function imports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/^\s*(?:import|export)[^'";]*from\s+'([^']+)'/gm)].map((m) => m[1]!);
}

describe('architecture boundaries', () => {
  it('keeps core/ and store/ free of adapters and peer libraries (only node: built-ins and each other)', () => {
    for (const file of [...sources('src/core'), ...sources('src/store')]) {
      for (const spec of imports(file)) {
        const allowed =
          spec.startsWith('node:') ||
          /^\.\.?\/(?:\.\.\/)?(core|store)\//.test(spec) ||
          /^\.\/[\w-]+\.js$/.test(spec);
        expect(allowed, `${file} imports ${spec}`).toBe(true);
      }
    }
  });

  it('keeps the root entry free of peer libraries', () => {
    for (const spec of imports('src/index.ts')) {
      expect(
        spec.startsWith('./core/') || spec.startsWith('./store/'),
        `src/index.ts imports ${spec}`,
      ).toBe(true);
    }
  });

  it('never lets an adapter import another adapter', () => {
    const adapters = [
      'express',
      'fastify',
      'fetch',
      'hono',
      'amqp',
      'nats',
      'redis-streams',
      'prometheus',
      'opentelemetry',
    ];
    for (const adapter of adapters) {
      let files: string[] = [];
      try {
        files = sources(join('src', adapter));
      } catch {
        continue; // not built yet
      }
      for (const file of files) {
        for (const spec of imports(file)) {
          const other = adapters.find((a) => a !== adapter && spec.includes(`/${a}/`));
          expect(other, `${file} imports the ${other} adapter`).toBeUndefined();
        }
      }
    }
  });
});

describe('generated SQL and Lua modules', () => {
  it('are in sync with their .sql and .lua sources', () => {
    expect(() =>
      execFileSync(process.execPath, ['scripts/gen-sql.mjs', '--check'], { stdio: 'pipe' }),
    ).not.toThrow();
  });
});
