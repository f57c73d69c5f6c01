import { ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { memoryStore } from '../../../src/index.js';

const servers: Array<{ close(): void }> = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

/**
 * An app whose handler ends its response with Node's own `end`, around the middleware's hooks on
 * Express's response prototype: what a sub-app of another copy of Express does.
 */
async function bypassingApp(status: number) {
  const executions = vi.fn();
  const app = express();
  app.use(express.json());
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

describe('Express: a response ended around the capture', () => {
  it('is delivered once, then every retry gets 409 response_not_captured and nothing runs again', async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const { executions, post } = await bypassingApp(201);
      const first = await post('uncaptured-1');
      expect(first.status).toBe(201);
      expect(await first.json()).toEqual({ id: 'ord_1' });
      // The marker is written once the response has finished; a retry right after may still find the
      // key in progress (409 in_progress), never a second execution.
      await vi.waitFor(async () => {
        const retry = await post('uncaptured-1');
        expect(retry.status).toBe(409);
        expect(retry.headers.get('content-type')).toBe('application/problem+json');
        expect(((await retry.json()) as { code: string }).code).toBe('response_not_captured');
      });
      expect(executions).toHaveBeenCalledTimes(1);
      await vi.waitFor(() => {
        expect(warnings.map((w) => (w as Error & { code?: string }).code)).toContain(
          'IDEMPOTENCY_KIT_UNCAPTURED',
        );
      });
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('releases the key when that response was a 5xx, so a retry runs again', async () => {
    const { executions, post } = await bypassingApp(503);
    expect((await post('uncaptured-5xx')).status).toBe(503);
    await vi.waitFor(async () => {
      expect((await post('uncaptured-5xx')).status).toBe(503);
      expect(executions).toHaveBeenCalledTimes(2);
    });
  });
});
