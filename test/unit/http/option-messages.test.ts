/**
 * Options that arrive untyped (a config file, the environment, JavaScript): a bad one is refused when the
 * middleware is created, with a message that shows the value's type, never at the first request.
 * - `maxBodyBytes: "1000"` and `minKeyLength: "36"` were shown as `got 1000` / `got 36`, as if a number
 *   had been given: the string is shown quoted, a number as JavaScript writes it (`NaN`, not JSON's `null`).
 * - `scope: 'tenant'` (a string where a function is expected) was accepted, then every request answered
 *   500 "scope is not a function": refused at creation by every adapter.
 */

import fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { idempotency as expressIdempotency } from '../../../src/express/index.js';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { withIdempotency } from '../../../src/fetch/index.js';
import { idempotency as honoIdempotency } from '../../../src/hono/index.js';
import { resolvePolicy } from '../../../src/http/options.js';
import { memoryStore } from '../../../src/index.js';

const invalid = (message: RegExp) =>
  expect.objectContaining({ name: 'InvalidOptionsError', message: expect.stringMatching(message) });

describe('option messages', () => {
  it('shows a string size as a string and a number as a number', () => {
    expect(() => resolvePolicy({ maxBodyBytes: '1000' as unknown as number })).toThrow(
      invalid(/maxBodyBytes: .*got "1000"$/),
    );
    expect(() => resolvePolicy({ maxBodyBytes: -1 })).toThrow(invalid(/got -1$/));
    expect(() => resolvePolicy({ maxBodyBytes: Number.NaN })).toThrow(invalid(/got NaN$/));
    expect(() => resolvePolicy({ minKeyLength: '36' as unknown as number })).toThrow(
      invalid(/minKeyLength: .*got "36"$/),
    );
    expect(() => resolvePolicy({ minKeyLength: 0.5 })).toThrow(invalid(/got 0\.5$/));
    expect(() => resolvePolicy({ requestBodyLimit: Number.POSITIVE_INFINITY })).toThrow(
      invalid(/requestBodyLimit: .*got Infinity$/),
    );
  });
});

describe('scope', () => {
  const store = memoryStore();
  const bad = { store, scope: 'tenant' as unknown as () => string };
  const message = /scope: expected a function of the request, got "tenant"/;

  it('is refused at creation when it is not a function, by every adapter', async () => {
    expect(() => expressIdempotency(bad)).toThrow(invalid(message));
    expect(() => withIdempotency(async () => new Response(), bad)).toThrow(invalid(message));
    expect(() => honoIdempotency(bad)).toThrow(invalid(message));
    const app = fastify();
    await expect(app.register(idempotencyPlugin, bad)).rejects.toThrow(invalid(message));
  });

  it('may be left out, or undefined', async () => {
    expect(() => expressIdempotency({ store, scope: undefined })).not.toThrow();
    expect(() => withIdempotency(async () => new Response(), { store })).not.toThrow();
    expect(() =>
      honoIdempotency({ store, scope: (c) => c.req.header('x-tenant') ?? '' }),
    ).not.toThrow();
    await fastify().register(idempotencyPlugin, { store, scope: undefined }).ready();
  });

  it('takes null as not given, as every option does (a JSON config writes null)', async () => {
    const none = { store, scope: null as unknown as undefined };
    expect(() => expressIdempotency(none)).not.toThrow();
    expect(() => withIdempotency(async () => new Response(), none)).not.toThrow();
    expect(() => honoIdempotency(none)).not.toThrow();
    await fastify().register(idempotencyPlugin, none).ready();
  });
});
