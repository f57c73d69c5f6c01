/**
 * A fetch-style handler (Next.js route handler, Bun/Deno server, …) on the SQLite store: the same request
 * twice runs the handler once; a different body with the same key is a 422 problem. Then an upload: the same
 * form sent again gets a new multipart boundary from `fetch`, and is still recognised as the same request.
 *
 * Run: `npx tsx examples/fetch-sqlite.ts` (writes a temporary database file).
 * @module
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { idempotencyOf, withIdempotency } from '../src/fetch/index.js';
import { sqliteStore } from '../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'ik-example-'));
const store = sqliteStore({ database: join(dir, 'idempotency.db') });

let executions = 0;
export const POST = withIdempotency(
  async (request: Request) => {
    executions++;
    const body = (await request.json()) as { amount: number };
    const ctx = idempotencyOf(request);
    return Response.json(
      { charged: body.amount, providerKey: ctx?.downstreamKey('charge') },
      { status: 201 },
    );
  },
  { store, namespace: 'payments', key: 'required' },
);

const send = (amount: number) =>
  POST(
    new Request('http://localhost/payments', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'pay-2026-0001' },
      body: JSON.stringify({ amount }),
    }),
  );
for (const amount of [4200, 4200, 9900]) {
  const response = await send(amount);
  console.log(
    response.status,
    response.headers.get('idempotent-replayed') ?? '-',
    await response.text(),
  );
}
console.log(`handler ran ${executions} time(s)`);

let uploads = 0;
export const UPLOAD = withIdempotency(
  async (request: Request) => {
    uploads++;
    const form = await request.formData();
    const evidence = form.get('evidence') as File;
    return Response.json({ dispute: form.get('dispute'), bytes: evidence.size }, { status: 201 });
  },
  { store, namespace: 'disputes', key: 'required' },
);

// Each Request serialises its FormData with a new random boundary, as a client's retry does.
const upload = (contents: string) => {
  const form = new FormData();
  form.append('dispute', 'dp_1');
  form.append('evidence', new Blob([contents], { type: 'application/pdf' }), 'receipt.pdf');
  return UPLOAD(
    new Request('http://localhost/disputes/evidence', {
      method: 'POST',
      headers: { 'idempotency-key': 'evidence-dp_1' },
      body: form,
    }),
  );
};
for (const contents of ['%PDF-1.7 receipt', '%PDF-1.7 receipt', '%PDF-1.7 another file']) {
  const response = await upload(contents);
  console.log(response.status, response.headers.get('idempotent-replayed') ?? '-');
}
console.log(`upload handler ran ${uploads} time(s)`);

await store.close?.();
rmSync(dir, { recursive: true, force: true });
