/**
 * The SQLite store on a file: the first run() executes the handler, the second one with the same key
 * replays the stored outcome without running it again.
 * Run: npx tsx examples/sqlite-store.ts (in your code, import from `idempotency-kit` and
 * `idempotency-kit/sqlite`)
 * @module
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createIdempotency } from '../src/index.js';
import { sqliteStore } from '../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-example-'));

// The store opens the file (WAL, busy timeout 5 s, synchronous=FULL), creates its table, and closes the
// file in close(). Every process that opens the same file shares the records.
const store = sqliteStore({ database: join(dir, 'idempotency.db') });
const idempotency = createIdempotency({ store, leaseMs: '30s', retentionMs: '24h' });

let charges = 0;
async function charge(amount: number, downstreamKey: string) {
  charges++;
  return { id: `ch_${charges}`, amount, downstreamKey };
}

const request = { key: 'order-1001', payload: { amount: 4200, currency: 'EUR' } };
for (const attempt of [1, 2]) {
  const outcome = await idempotency.run(request, (ctx) =>
    charge(4200, ctx.downstreamKey('charge')),
  );
  switch (outcome.status) {
    case 'executed':
      console.log(`attempt ${attempt}: executed`, outcome.value, `(token ${outcome.token})`);
      break;
    case 'replayed':
      console.log(`attempt ${attempt}: replayed`, outcome.value);
      break;
    case 'in_progress':
      console.log(`attempt ${attempt}: in progress, retry in ${outcome.retryAfterMs} ms`);
      break;
    case 'mismatch':
      console.log(`attempt ${attempt}: the key was used with another payload`);
      break;
  }
}
console.log(`charges made: ${charges}`);

await store.close();
rmSync(dir, { recursive: true, force: true });
