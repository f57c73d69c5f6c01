/**
 * Hono: a middleware before the layer that read the body with `c.req.formData()`. The layer took the body
 * from Hono's cache as bytes, which Hono makes from the cached form with `new Response(formData)`: a
 * multipart encoding with a new random boundary each time (an urlencoded form too). Every retry of the
 * same form was a 422 instead of the replay. The layer now covers such a form by its entries (each file
 * by name, type and bytes): a retry replays, another form under the key is still a 422.
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { describe, expect, it, onTestFinished } from 'vitest';
import { idempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';

async function start(): Promise<string> {
  const app = new Hono();
  // A middleware that reads the form before the layer, as an authorisation check on a field may.
  app.use('/orders', async (c, next) => {
    await c.req.formData();
    await next();
  });
  app.use('/orders', idempotency({ store: memoryStore(), key: 'required' }));
  let n = 0;
  app.post('/orders', async (c) => {
    const form = await c.req.formData();
    const file = form.get('receipt');
    return c.json(
      {
        n: ++n,
        amount: form.get('amount'),
        receipt: file instanceof File ? await file.text() : null,
      },
      201,
    );
  });
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  onTestFinished(() => new Promise<void>((done) => server.close(() => done())));
  await new Promise((resolve) => server.once('listening', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function post(url: string, key: string, body: string | FormData, type?: string) {
  const response = await fetch(`${url}/orders`, {
    method: 'POST',
    headers: { 'idempotency-key': key, ...(type === undefined ? {} : { 'content-type': type }) },
    body,
  });
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed'),
    body: (await response.json()) as { n?: number },
  };
}

// A new FormData each time: fetch picks a new random boundary, as a client's retry does.
function form(amount: string, receipt: string): FormData {
  const data = new FormData();
  data.append('amount', amount);
  data.append('receipt', new Blob([receipt], { type: 'application/pdf' }), 'receipt.pdf');
  return data;
}

describe('Hono: a form a middleware read with c.req.formData() before the layer', () => {
  it('replays a retried urlencoded form, refuses another under the key with 422', async () => {
    const url = await start();
    const type = 'application/x-www-form-urlencoded';
    const first = await post(url, 'k-url', 'amount=10', type);
    const retry = await post(url, 'k-url', 'amount=10', type);
    const other = await post(url, 'k-url', 'amount=99', type);
    expect(first).toMatchObject({ status: 201, body: { n: 1, amount: '10' } });
    expect(retry).toMatchObject({ status: 201, replayed: 'true', body: first.body });
    expect(other.status).toBe(422);
  });

  it('replays a retried multipart upload, refuses another file under the key with 422', async () => {
    const url = await start();
    const first = await post(url, 'k-upload', form('10', 'AAAA'));
    const retry = await post(url, 'k-upload', form('10', 'AAAA'));
    const other = await post(url, 'k-upload', form('10', 'BBBB'));
    expect(first).toMatchObject({ status: 201, body: { n: 1, receipt: 'AAAA' } });
    expect(retry).toMatchObject({ status: 201, replayed: 'true', body: first.body });
    expect(other.status).toBe(422);
  });
});
