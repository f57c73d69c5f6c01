import { ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import express4 from 'express4';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { memoryStore } from '../../../src/index.js';

const servers: Array<{ close(): void }> = [];
const warnings: Error[] = [];
const onWarning = (warning: Error) => warnings.push(warning);
beforeAll(() => {
  process.on('warning', onWarning);
});
afterAll(() => {
  process.off('warning', onWarning);
});
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

/**
 * An app whose handler ends its response with Node's own `end`, around the middleware's hooks on
 * Express's response prototype: what a sub-app of another copy of Express does.
 */
async function bypassingApp(framework: typeof express, status: number) {
  const executions = vi.fn();
  const app = framework();
  app.use(framework.json());
  app.use(idempotency({ store: memoryStore() }));
  app.post('/orders', (_req, res) => {
    executions();
    res.statusCode = status;
    res.setHeader('content-type', 'application/json');
    const nodeEnd = ServerResponse.prototype.end as (this: ServerResponse, chunk: string) => void;
    nodeEnd.call(res, JSON.stringify({ id: 'ord_1' }));
  });
  const url = await new Promise<string>((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => {
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}/orders`);
    });
    servers.push(server);
  });
  const post = (key: string) =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: '{"amount":1}',
    });
  return { executions, post };
}

describe.each([
  ['Express 5', express],
  ['Express 4', express4],
])('%s: a response ended around the capture', (name, framework) => {
  const tag = name.replace(' ', '');
  it('is delivered once, then every retry gets 409 response_not_captured and nothing runs again', async () => {
    const { executions, post } = await bypassingApp(framework, 201);
    const first = await post(`uncaptured-1-${tag}`);
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ id: 'ord_1' });
    // The marker is written once the response has finished; a retry right after may still find the
    // key in progress (409 in_progress), never a second execution.
    await vi.waitFor(async () => {
      const retry = await post(`uncaptured-1-${tag}`);
      expect(retry.status).toBe(409);
      expect(retry.headers.get('content-type')).toBe('application/problem+json');
      expect(((await retry.json()) as { code: string }).code).toBe('response_not_captured');
    });
    expect(executions).toHaveBeenCalledTimes(1);
    // Once per process (the cause is the app's wiring), whichever major sent the response first.
    await vi.waitFor(() => {
      const codes = warnings.map((w) => (w as Error & { code?: string }).code);
      expect(codes.filter((code) => code === 'IDEMPOTENCY_KIT_UNCAPTURED')).toHaveLength(1);
    });
  });

  it('releases the key when that response was a 5xx, so a retry runs again', async () => {
    const { executions, post } = await bypassingApp(framework, 503);
    expect((await post(`uncaptured-5xx-${tag}`)).status).toBe(503);
    await vi.waitFor(async () => {
      expect((await post(`uncaptured-5xx-${tag}`)).status).toBe(503);
      expect(executions).toHaveBeenCalledTimes(2);
    });
  });
});
