/**
 * The cost of reading a JSON body's numbers exactly (`src/http/json-numbers.ts`), which the fingerprint
 * does for a body that may hold a number a double would round: CPU on the event loop that a client chooses,
 * up to the 1 MiB `requestBodyLimit`. For bodies of several shapes, side by side in one run: `JSON.parse`
 * alone (the baseline, which the fingerprint runs first anyway), the exact reader as it was before it was
 * made cheaper (`test/helpers/json-numbers-before.ts`), the exact reader now, and the whole
 * `httpFingerprint` of the body.
 * Run: npx tsx bench/json-numbers.ts (`BENCH_ROUNDS`, default 7; `BENCH_MS`, the time each row gets per
 * round, default 300; `ONLY=<shape ids>` measures some shapes and writes nothing;
 * `COMPARE=name=/abs/path/to/src,…` adds an `httpFingerprint` row per other source tree and writes nothing).
 */
import { httpFingerprint } from '../src/http/fingerprint.js';
import { parseJsonExactly } from '../src/http/json-numbers.js';
import { parseJsonExactlyBefore } from '../test/helpers/json-numbers-before.js';
import { type BenchRow, median } from './lib/report.js';
import { ResultsFile } from './lib/results.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const ROW_MS = Number(process.env.BENCH_MS ?? 300);
const ONLY = process.env.ONLY?.split(',');
const COMPARE = (process.env.COMPARE ?? '')
  .split(',')
  .filter((entry) => entry !== '')
  .map((entry) => {
    const [name, src] = entry.split('=');
    if (name === undefined || src === undefined)
      throw new Error(`COMPARE: name=/abs/src, not ${entry}`);
    return { name, src };
  });
const partial = ONLY !== undefined || COMPARE.length > 0;

const MIB = 1024 * 1024;

// A deterministic generator, so every run measures the same bodies.
let seed = 42;
function random(): number {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
}
function digits(count: number): string {
  let text = String(1 + Math.floor(random() * 9));
  while (text.length < count) text += String(Math.floor(random() * 10));
  return text;
}

// `open`, then `item(i)` joined by commas until the text is about `size` bytes, then `close`.
function fill(open: string, item: (i: number) => string, close: string, size = MIB): string {
  const parts: string[] = [];
  let length = open.length + close.length;
  for (let i = 0; length < size; i++) {
    const next = item(i);
    parts.push(next);
    length += next.length + 1;
  }
  return `${open}${parts.join(',')}${close}`;
}

function payment(id: string): string {
  return JSON.stringify({
    amount: 4200,
    currency: 'EUR',
    customer: 'cus_Q2x8Lm0pZ1',
    description: 'Order #10428, 2 items',
    metadata: { cart: 'c_88f1', channel: 'web', campaign: 'winter-2026' },
    payment_method: { type: 'card', card: { brand: 'visa', last4: '4242', exp: '12/29' } },
    capture: true,
    created: 1732600000123,
    items: [
      { sku: 'SKU-1042', qty: 1, price: 2500 },
      { sku: 'SKU-2210', qty: 2, price: 850 },
    ],
  }).replace('{', `{"account_id":${id},`);
}

interface Shape {
  id: string;
  name: string;
  text: string;
}

const shapes: Shape[] = [
  { id: 'inf', name: '1 MiB of `1e400`', text: fill('[', () => '1e400', ']') },
  { id: 'ids', name: '1 MiB of 19-digit ids', text: fill('[', () => digits(19), ']') },
  {
    id: 'decimals',
    name: '1 MiB of long decimals (`0.` and 20 digits)',
    text: fill('[', () => `0.${digits(20)}`, ']'),
  },
  {
    id: 'keys',
    name: '1 MiB object of ~60k keys with short numbers, one int64',
    text: fill(
      '{"id":9223372036854775807,',
      (i) => `"k${i.toString(36).padStart(6, '0')}":${i % 1000}`,
      '}',
    ),
  },
  {
    id: 'doubles',
    name: '1 MiB of doubles as JSON.stringify writes them, one int64',
    text: fill('[9223372036854775807,', () => String(random() * 1e6), ']'),
  },
  {
    id: 'payments',
    name: '1 MiB array of payment bodies, each with an int64 id',
    text: fill('[', () => payment(digits(19)), ']'),
  },
  {
    id: 'keys-inf',
    name: '1 MiB object of ~50k keys, each `1e400`',
    text: fill('{', (i) => `"k${i.toString(36).padStart(6, '0')}":1e400`, '}'),
  },
  {
    // The exact reader's worst case: an object whose first key comes again at its end is read afresh
    // (JSON.parse kept the last member, not the one patched), after the walk that patched it.
    id: 'repeated',
    name: '1 MiB object of ~50k keys, each `1e400`, its first key repeated at the end',
    text: fill('{', (i) => `"k${i.toString(36).padStart(6, '0')}":1e400`, ',"k000000":1}'),
  },
  {
    id: 'payment',
    name: 'one payment body with an int64 id',
    text: payment('9223372036854775807'),
  },
];

type Op = (text: string) => unknown;

function fingerprintOf(fingerprint: typeof httpFingerprint): Op {
  return (text) =>
    fingerprint({
      method: 'POST',
      path: '/payments',
      query: '',
      contentType: 'application/json',
      body: Buffer.from(text, 'utf8'),
    });
}

// Calls of `op` on `text` for about `ms`, in batches; returns calls per second.
function rate(op: Op, text: string, ms: number): number {
  let calls = 0;
  const started = process.hrtime.bigint();
  const until = started + BigInt(ms) * 1_000_000n;
  let now = started;
  while (now < until) {
    op(text);
    calls++;
    now = process.hrtime.bigint();
  }
  return calls / (Number(now - started) / 1e9);
}

async function main() {
  const rows: Array<[name: string, op: Op]> = [
    ['JSON.parse (baseline)', (text) => JSON.parse(text)],
    ['parseJsonExactly, before', parseJsonExactlyBefore],
    ['parseJsonExactly, now (its own JSON.parse, then the patch)', parseJsonExactly],
    ['httpFingerprint, now', fingerprintOf(httpFingerprint)],
  ];
  for (const { name, src } of COMPARE) {
    const module = (await import(`${src}/http/fingerprint.ts`)) as {
      httpFingerprint: typeof httpFingerprint;
    };
    rows.push([`httpFingerprint, [${name}]`, fingerprintOf(module.httpFingerprint)]);
  }
  const results = new ResultsFile('json-numbers');
  const command = 'npx tsx bench/json-numbers.ts';
  const summary: string[] = [];
  for (const shape of shapes) {
    if (ONLY !== undefined && !ONLY.includes(shape.id)) continue;
    const bytes = Buffer.byteLength(shape.text, 'utf8');
    // Warm up every row, then rows in rounds, each round in a rotated order (the machine drifts).
    for (const [, op] of rows) rate(op, shape.text, ROW_MS);
    const rates: number[][] = rows.map(() => []);
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < rows.length; k++) {
        const i = (k + round) % rows.length;
        rates[i]!.push(rate(rows[i]![1], shape.text, ROW_MS));
      }
    }
    const tableRows: BenchRow[] = rows.map(([name], i) => {
      const perSecond = median(rates[i]!);
      return {
        name,
        opsPerSec: perSecond,
        medianUs: 1e6 / perSecond,
        extra: {
          'ms per MiB': ((1e3 / perSecond) * (MIB / bytes)).toFixed(2),
          'same-round ratio to JSON.parse (median)': `${median(
            rates[i]!.map((r, round) => rates[0]![round]! / r),
          ).toFixed(1)}×`,
          'ms per body, rounds': rates[i]!.map((r) => (1e3 / r).toFixed(2)).join(' / '),
        },
      };
    });
    results.table(
      `${shape.name} (${bytes.toLocaleString('en-US')} bytes; ${ROUNDS} rounds of ${ROW_MS} ms a row)`,
      command,
      tableRows,
      { chart: false },
    );
    summary.push(
      `| ${shape.name} | ${tableRows.map((row) => (row.medianUs! / 1e3).toPrecision(3)).join(' | ')} |`,
    );
  }
  results.text(
    [
      '### Summary: ms per body (medians)',
      '',
      `| shape | ${rows.map(([name]) => name).join(' | ')} |`,
      `| --- | ${rows.map(() => '---').join(' | ')} |`,
      ...summary,
      '',
    ].join('\n'),
  );
  if (!partial) results.write();
}

await main();
