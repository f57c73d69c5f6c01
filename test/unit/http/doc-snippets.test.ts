/**
 * Code blocks of the docs that are type-checked in `test/types/` (by `tsc --noEmit -p tsconfig.json`,
 * under `strict`): each must be, line for line, the code between its markers there, so that the doc shows
 * what compiles. The `transactionalRoute` example of the Fastify page read `request.body.amount` with no
 * request type, which does not compile (`request.body` is `unknown`).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const read = (path: string) => readFileSync(new URL(`../../../${path}`, import.meta.url), 'utf8');

// The first ```ts block after `heading` in the doc.
function docBlock(doc: string, heading: string): string {
  const start = doc.indexOf(heading);
  expect(start, heading).toBeGreaterThanOrEqual(0);
  const match = /```ts\n([\s\S]*?)```/.exec(doc.slice(start));
  return match?.[1]?.trimEnd() ?? '';
}

// The lines between `// doc: name` and `// end doc` in a type-checked file.
function checkedBlock(source: string, name: string): string {
  const match = new RegExp(`// doc: ${name}\\n([\\s\\S]*?)// end doc`).exec(source);
  return match?.[1]?.trimEnd() ?? '';
}

describe('doc snippets', () => {
  it('shows the type-checked transactionalRoute example on the Fastify page', () => {
    const doc = docBlock(
      read('docs/adapters/fastify.md'),
      '## In your database transaction: `transactionalRoute`',
    );
    const checked = checkedBlock(
      read('test/types/fastify-transactional-route.ts'),
      'fastify transactionalRoute',
    );
    expect(checked).not.toBe('');
    expect(doc).toBe(checked);
  });
});
