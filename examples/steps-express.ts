/**
 * Steps: an Express order API on SQLite whose handler charges a card, then ships, each as a recorded step.
 * The first request's handler "crashes" right after the charge (it hangs, and its lease is left to run
 * out, as a killed process's would); the client's retry takes the key over once the lease has passed,
 * gets the recorded charge instead of charging again, and only ships. A different order under the same
 * key is refused with 422, even though the first request never finished; the operator who reads the 422's
 * storage key in the logs inspects it and sees why (a crashed request reserves it), and one without a key in
 * hand lists every crashed key after the incident.
 *
 * Run: `npx tsx examples/steps-express.ts`.
 * @module
 */
import type { AddressInfo } from 'node:net';
import express from 'express';
import { idempotency } from '../src/express/index.js';
import { inspectKey, listCrashedKeys } from '../src/index.js';
import { sqliteStore } from '../src/sqlite/index.js';

/** A payment provider that deduplicates by idempotency key, as Stripe and Adyen do. */
const provider = {
  charges: new Map<string, { id: string; amount: number }>(),
  calls: 0,
  async charge(amount: number, idempotencyKey: string) {
    this.calls++;
    const existing = this.charges.get(idempotencyKey);
    if (existing !== undefined) return existing;
    const charge = { id: `ch_${this.charges.size + 1}`, amount };
    this.charges.set(idempotencyKey, charge);
    return charge;
  },
};

const store = sqliteStore({ database: ':memory:' });
// What a log line of the mismatch would carry: the storage key (never the client's raw key).
let mismatchedStorageKey = '';

const app = express();
app.use(express.json());
app.use(
  idempotency({
    store,
    hooks: {
      onMismatch: (event) => {
        mismatchedStorageKey = event.storageKey;
      },
    },
    namespace: 'orders',
    leaseMs: '1s',
    // Only so that the hanging handler below lets its lease run out, as a killed process would: a real
    // service keeps the default (the lease is extended while the handler runs).
    extendLease: false,
  }),
);
app.post('/orders', async (req, res) => {
  const ctx = req.idempotency;
  if (ctx === undefined) throw new Error('an Idempotency-Key header is required');
  const { amount } = req.body as { amount: number };
  // Recorded on the claim: a retry that takes over this request gets this result back, uncalled.
  const payment = await ctx.step('charge', ({ downstreamKey }) =>
    provider.charge(amount, downstreamKey),
  );
  if (req.get('x-crash') === 'after-charge') await new Promise(() => {});
  const shipment = await ctx.step('ship', () => ({ tracking: `TRK-${payment.id}` }));
  res.status(201).json({ payment, shipment, attempt: ctx.attempt });
});

const server = app.listen(0);
const { port } = server.address() as AddressInfo;
const order = (amount: number, headers: Record<string, string> = {}, signal?: AbortSignal) =>
  fetch(`http://127.0.0.1:${port}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': 'order-7', ...headers },
    body: JSON.stringify({ amount }),
    signal,
  });

// The first request charges, then its handler dies; the client gives up waiting.
const first = order(4200, { 'x-crash': 'after-charge' }, AbortSignal.timeout(300)).catch(
  () => 'no answer',
);
console.log(`first request              → ${await first}`);
console.log(`retry while the lease holds → ${(await order(4200)).status}`);
await new Promise((resolve) => setTimeout(resolve, 1100));
const misuse = await order(9900);
const problem = (await misuse.json()) as { code: string };
console.log(`same key, other order       → ${misuse.status} ${problem.code}`);
// Why? Inspect the key from the log line: a crashed request holds it for its own retry.
const inspection = await inspectKey(store, mismatchedStorageKey);
const steps = inspection.record?.status === 'in_progress' ? inspection.record.steps : undefined;
console.log(
  `inspect the key             → ${inspection.state}, reserved for its request, steps: ${Object.keys(steps ?? {}).join(', ')}`,
);
// After an incident, without a key in hand: list every key a crashed request still holds (a page at a time;
// the CLI's `idempotency-kit list --crashed --sqlite <file>` prints the same).
const listing = await listCrashedKeys(store, { limit: 100 });
const listed = listing.keys.map((key) =>
  key.storageKey === mismatchedStorageKey ? 'that key' : 'another key',
);
console.log(`list the crashed keys       → ${listed.join(', ')}`);
const retry = await order(4200);
console.log(`retry after the lease       → ${retry.status} ${JSON.stringify(await retry.json())}`);
const after = await listCrashedKeys(store, { limit: 100 });
console.log(`crashed keys after it       → ${after.keys.length}`);
const replay = await order(4200);
console.log(
  `and again                   → ${replay.status} (replayed: ${replay.headers.get('idempotent-replayed')})`,
);
console.log(`provider calls: ${provider.calls}, charges: ${provider.charges.size}`);
server.close();
server.closeAllConnections();
