/**
 * Every name the store author's guide (docs/guides/writing-a-store.md) uses is one a third party can
 * reach: an export of a public subpath the guide names (`idempotency-kit`, `idempotency-kit/testing`, …),
 * a member of one of their exported types (`leaseMs`, `claimMany`, `storeClock`), or a word that names
 * no API of the package (SQL, Redis, a client library; listed below with why). The guide once named
 * `withBatching` and rule 10's duration checks were internal (`assertPositiveMs`): an author told to use
 * them found nothing to import. Exports are read by the TypeScript checker (types included), and every
 * value export the guide names is also imported from its subpath's source and must be defined.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const GUIDE = 'docs/guides/writing-a-store.md';

// Words of the guide in code font that are no name of this package, and why.
const NOT_API = new Set([
  // SQL and Redis: keywords, functions, columns, driver fields.
  ...[
    'BIGINT',
    'NEXTVAL',
    'RETURNING',
    'SELECT',
    'TIME',
    'UPDATE',
    'WHERE',
    'JSON_SET',
    'json_set',
  ],
  ...['NOW', 'IF'],
  ...['CLIENT_FOUND_ROWS', 'affectedRows', 'created_at', 'in_progress', 'bigint'],
  // JavaScript values and globals, and the letters of a SQL example (`SET a = a + 1, b = a`).
  ...['true', 'false', 'undefined', 'Date', 'a', 'b'],
  // Tools and client libraries the guide names, and a client's method (a SQL client's `query`).
  'query',
  ...['tsx', 'vitest', 'mariadb', 'mysql2'],
  // Parameter names: `createStore(prefix)`, and the store's name the duration checks' messages start with.
  ...['prefix', 'who'],
  // The engine's answer to a reserved key's claim (`RunOutcome`'s kind, spelled in prose).
  'mismatch',
]);

/** The guide's text, its subpaths (`idempotency-kit…` in code font or imports) and its code-font names. */
function readGuide() {
  const text = readFileSync(join(root, GUIDE), 'utf8');
  const subpaths = new Set(
    [...text.matchAll(/['`](idempotency-kit(?:\/[a-z-]+)*)['`]/g)].map((m) => m[1]!),
  );
  const inline = [...text.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!.trim());
  // A bare name (`applyClaim`), or a call as the contract table writes it (`claim(key, …)`).
  const names = new Set(
    inline
      .map((code) => /^([A-Za-z_$][\w$]*)(?:\(.*\))?$/.exec(code)?.[1])
      .filter((name): name is string => name !== undefined),
  );
  // Names the code blocks import, with the subpath they import them from.
  const imports: Array<{ name: string; subpath: string }> = [];
  for (const m of text.matchAll(
    /import\s+(?:type\s+)?\{([^}]*)\}\s+from\s+'(idempotency-kit[^']*)'/g,
  )) {
    for (const name of m[1]!.split(',').map((n) => n.replace(/^type\s+/, '').trim())) {
      if (name !== '') imports.push({ name, subpath: m[2]! });
    }
  }
  return { subpaths: [...subpaths], names: [...names], imports };
}

/** The source entry of a subpath (`idempotency-kit/testing` → src/testing/index.ts). */
const entryOf = (subpath: string) =>
  join(root, 'src', subpath.slice('idempotency-kit'.length), 'index.ts');

/** Each subpath's exports (values and types), and the property names of its exported types. */
function readExports(subpaths: string[]) {
  const program = ts.createProgram(subpaths.map(entryOf), {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    types: ['node'],
  });
  const checker = program.getTypeChecker();
  const exports = new Map<string, Map<string, { value: boolean }>>();
  const members = new Set<string>();
  for (const subpath of subpaths) {
    const source = program.getSourceFile(entryOf(subpath));
    if (source === undefined) throw new Error(`${GUIDE} names ${subpath}, which has no entry`);
    const module = checker.getSymbolAtLocation(source);
    const named = new Map<string, { value: boolean }>();
    for (const symbol of module === undefined ? [] : checker.getExportsOfModule(module)) {
      const target =
        symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
      named.set(symbol.name, { value: (target.flags & ts.SymbolFlags.Value) !== 0 });
      if (target.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias)) {
        const type = checker.getDeclaredTypeOfSymbol(target);
        for (const part of type.isUnion() ? type.types : [type]) {
          for (const property of checker.getPropertiesOfType(part)) members.add(property.name);
        }
      }
    }
    exports.set(subpath, named);
  }
  return { exports, members };
}

describe(`the names ${GUIDE} uses`, () => {
  const guide = readGuide();
  const { exports, members } = readExports(guide.subpaths);
  const exportedFrom = (name: string) =>
    guide.subpaths.filter((subpath) => exports.get(subpath)?.has(name));

  it('names the public subpaths it documents', () => {
    expect(guide.subpaths).toEqual(
      expect.arrayContaining([
        'idempotency-kit',
        'idempotency-kit/testing',
        'idempotency-kit/testing/checks',
      ]),
    );
  });

  it('are each exported by a public subpath, a member of an exported type, or no API name', () => {
    const unknown = guide.names.filter(
      (name) => exportedFrom(name).length === 0 && !members.has(name) && !NOT_API.has(name),
    );
    expect(unknown, `${GUIDE} names these, which no public subpath exports`).toEqual([]);
  });

  it('imports in its code blocks only what each subpath exports', () => {
    const missing = guide.imports.filter(({ name, subpath }) => !exports.get(subpath)?.has(name));
    // The reader's own module (`./my-store.js`) is not matched: only `idempotency-kit…` imports are.
    expect(missing).toEqual([]);
  });

  it('can import every value it names from the subpath that exports it', async () => {
    const values = guide.names.flatMap((name) =>
      exportedFrom(name)
        .filter((subpath) => exports.get(subpath)?.get(name)?.value)
        .map((subpath) => ({ name, subpath })),
    );
    // The duration checks of rule 10 are among them: a third-party store calls them as the built-in ones do.
    expect(values.map((v) => v.name)).toEqual(
      expect.arrayContaining(['assertClaimDurations', 'assertPositiveMs', 'assertBatchDurations']),
    );
    for (const { name, subpath } of values) {
      const module = (await import(pathToFileURL(entryOf(subpath)).href)) as Record<
        string,
        unknown
      >;
      expect(module[name], `${name} from ${subpath}`).toBeDefined();
    }
  });
}, 60_000);
