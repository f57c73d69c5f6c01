/**
 * Type test, checked by `tsc --noEmit -p tsconfig.json` (never run): `c.get('idempotency')` is possibly
 * undefined, since the middleware sets it only while the handler runs under a claim. Typed as always
 * present, `c.get('idempotency').downstreamKey(…)` compiled and threw a TypeError (a 500) on a request
 * without a key under the default `key: 'optional'`, or on a route without the middleware.
 */
import { Hono } from 'hono';
import { type IdempotencyContext, idempotency } from '../../src/hono/index.js';
import { memoryStore } from '../../src/index.js';

const idem = idempotency({ store: memoryStore() });
const app = new Hono();

app.post('/orders', idem, (c) => {
  // @ts-expect-error possibly undefined: no context without a key under `key: 'optional'`
  c.get('idempotency').downstreamKey('charge');
  const context: IdempotencyContext | undefined = c.get('idempotency');
  return c.json({ key: context?.key, charge: c.get('idempotency')?.downstreamKey('charge') });
});

app.post('/unprotected', (c) => {
  // @ts-expect-error possibly undefined: a route without the middleware has none
  return c.text(c.get('idempotency').key);
});
