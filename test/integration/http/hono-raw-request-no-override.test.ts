/**
 * `c.req.raw` keeps its body on `@hono/node-server` with `overrideGlobalObjects: false` too: its request is
 * then none of the runtime's own Requests, and `new Request(raw, { body })` is refused by undici
 * ("Cannot read properties of undefined (reading 'window')"), so a handler reading `c.req.raw` answered
 * 500 there (src/hono/index.ts, `requestWithBody`).
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { describe, expect, it, onTestFinished } from 'vitest';
import { idempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';

describe('Hono middleware on @hono/node-server without overrideGlobalObjects', () => {
  it('gives the handler the body through c.req.raw after c.req.json()', async () => {
    // Arrange
    const app = new Hono();
    app.post('/charges', idempotency({ store: memoryStore() }), async (c) => {
      const parsed = await c.req.json();
      return c.json({ parsed, raw: await c.req.raw.text() }, 201);
    });
    const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
      const s = serve(
        { fetch: app.fetch, port: 0, hostname: '127.0.0.1', overrideGlobalObjects: false },
        () => resolve(s),
      );
    });
    onTestFinished(() => {
      server.close();
    });
    const { port } = server.address() as AddressInfo;
    // Act
    const response = await fetch(`http://127.0.0.1:${port}/charges`, {
      method: 'POST',
      headers: { 'idempotency-key': randomUUID(), 'content-type': 'application/json' },
      body: '{"amount":4200}',
    });
    // Assert
    expect(response.status).toBe(201);
    expect(await response.json()).toEqual({ parsed: { amount: 4200 }, raw: '{"amount":4200}' });
  });
});
