/**
 * The cost of writing text with lone surrogates for the fingerprint (`src/core/lone-surrogates.ts`), which a
 * client chooses: a text body a parser decoded as UTF-16 (Express's `express.text()` with
 * `charset=utf-16le`) keeps its lone surrogates, and a JSON body's `"\uD800"` escapes give them too. For
 * each shape, side by side in one run: `generalisedUtf8` (a text body's bytes) and `codeUnitsHex` (a JSON
 * string's form) as they were before they were made linear (`test/helpers/lone-surrogates-before.ts`) and
 * now, with `Buffer.from(value, 'utf8')` as the floor; then the check for a lone surrogate, the `/\p{Cs}/u`
 * test (`src/core/text-flaw.ts`) against `String.prototype.isWellFormed`; then `httpFingerprint` of the
 * shape as a `text/plain` body, the whole cost a request pays.
 * Rows run in a rotated order each round; the tables give each row's median ms per call and the median of
 * the same-round ratios before / now. Prints its tables; writes no results file.
 * Run: `npx tsx bench/lone-surrogates.ts` (`BENCH_ROUNDS`, default 3; `BENCH_MS`, the time each row gets
 * per round, default 200, at least one call; `ONLY=<shape ids>` measures some shapes).
 */
import { codeUnitsHex, generalisedUtf8, isWellFormed } from '../src/core/lone-surrogates.js';
import { hasLoneSurrogate } from '../src/core/text-flaw.js';
import { httpFingerprint } from '../src/http/fingerprint.js';
import {
  codeUnitsHexBefore,
  generalisedUtf8Before,
} from '../test/helpers/lone-surrogates-before.js';
import { median } from './lib/report.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ROW_MS = Number(process.env.BENCH_MS ?? 200);
const ONLY = process.env.ONLY?.split(',');

interface Shape {
  id: string;
  name: string;
  text: string;
}

const shapes: Shape[] = [
  {
    id: 'utf16-100k',
    name: 'a 100 kB UTF-16LE body of 0xD800 code units (50,000 lone surrogates)',
    text: '\ud800'.repeat(50_000),
  },
  { id: 'lone-200k', name: '200,000 lone surrogates', text: '\udc00'.repeat(200_000) },
  { id: 'lone-1m', name: '1,000,000 lone surrogates', text: '\ud800'.repeat(1_000_000) },
  {
    id: 'mixed',
    name: '1,000,000 code units, every 10th a lone surrogate, the rest ASCII, é, €',
    text: 'abcd\u00e9fgh\u20ac\ud800'.repeat(100_000),
  },
  {
    id: 'pairs',
    name: '500,000 emoji (pairs) and one lone surrogate',
    text: `${'\ud83d\ude00'.repeat(500_000)}\udfff`,
  },
  {
    id: 'ascii',
    name: '1,000,000 ASCII characters and one lone surrogate',
    text: `${'a'.repeat(1_000_000)}\ud800`,
  },
];

type Op = (text: string) => unknown;

// Calls of `op` on `text` for about `ms`, at least one; returns ms per call.
function msPerCall(op: Op, text: string, ms: number): number {
  let calls = 0;
  const started = process.hrtime.bigint();
  const until = started + BigInt(ms) * 1_000_000n;
  let now = started;
  do {
    op(text);
    calls++;
    now = process.hrtime.bigint();
  } while (now < until);
  return Number(now - started) / 1e6 / calls;
}

const rows: Array<[name: string, op: Op]> = [
  ['Buffer.from(value, utf8) (floor)', (text) => Buffer.from(text, 'utf8')],
  ['generalisedUtf8, before', generalisedUtf8Before],
  ['generalisedUtf8, now', generalisedUtf8],
  ['codeUnitsHex, before', codeUnitsHexBefore],
  ['codeUnitsHex, now', codeUnitsHex],
  ['hasLoneSurrogate (/\\p{Cs}/u)', hasLoneSurrogate],
  ['!isWellFormed', (text) => !isWellFormed(text)],
  [
    'httpFingerprint, text/plain body, now',
    (text) =>
      httpFingerprint({
        method: 'POST',
        path: '/notes',
        query: '',
        contentType: 'text/plain',
        body: text,
      }),
  ],
];
// Row pairs whose same-round ratio the summary gives: [slower (before), faster (now)].
const pairs: Array<[before: number, now: number]> = [
  [1, 2],
  [3, 4],
  [5, 6],
];

function main() {
  const summary: string[] = [];
  for (const shape of shapes) {
    if (ONLY !== undefined && !ONLY.includes(shape.id)) continue;
    // Both versions agree on every shape, or the figures compare nothing.
    if (!generalisedUtf8(shape.text).equals(generalisedUtf8Before(shape.text)))
      throw new Error(`generalisedUtf8 changed its bytes on ${shape.id}`);
    if (codeUnitsHex(shape.text) !== codeUnitsHexBefore(shape.text))
      throw new Error(`codeUnitsHex changed its hex on ${shape.id}`);
    if (hasLoneSurrogate(shape.text) !== !isWellFormed(shape.text))
      throw new Error(`the two checks disagree on ${shape.id}`);
    for (const [, op] of rows) msPerCall(op, shape.text, ROW_MS / 4); // warm-up
    const times: number[][] = rows.map(() => []);
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < rows.length; k++) {
        const i = (k + round) % rows.length;
        times[i]!.push(msPerCall(rows[i]![1], shape.text, ROW_MS));
      }
    }
    const lines = [
      `### ${shape.name} (${shape.text.length.toLocaleString('en-US')} code units; ${ROUNDS} rounds of ${ROW_MS} ms a row)`,
      '',
      '| row | ms per call (median) | rounds |',
      '| --- | --- | --- |',
      ...rows.map(
        ([name], i) =>
          `| ${name} | ${median(times[i]!).toPrecision(3)} | ${times[i]!.map((t) => t.toPrecision(3)).join(' / ')} |`,
      ),
      '',
    ];
    console.log(lines.join('\n'));
    const ratios = pairs.map(([before, now]) =>
      median(times[before]!.map((t, round) => t / times[now]![round]!)),
    );
    summary.push(
      `| ${shape.id} | ${ratios.map((r) => `${r.toFixed(1)}×`).join(' | ')} | ${median(times[7]!).toPrecision(3)} |`,
    );
  }
  console.log(
    [
      '### Summary: before / now, median of same-round ratios',
      '',
      '| shape | generalisedUtf8 | codeUnitsHex | /\\p{Cs}/u / !isWellFormed | httpFingerprint now, ms |',
      '| --- | --- | --- | --- | --- |',
      ...summary,
      '',
    ].join('\n'),
  );
}

main();
