/**
 * "Was my request with key K executed?", answered from the command line: `inspect --key` derives the
 * storage key from the client's key, the engine's namespace and the request's scope exactly as the engine
 * did when the request ran through Express, and an absent answer says which namespace and scope it is
 * about (a request scoped by its credentials is stored under another key). With `--http`, it finds a
 * request whose route scope starts `consumer:` (which the middleware keys apart from consumer records),
 * where the consumer's derivation reports it absent and says to add `--http`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { afterAll, describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { sqliteStore } from '../../../src/sqlite/index.js';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';
import { listenExpress } from '../../helpers/listen-express.js';
import { postWithKey } from '../../helpers/post-with-key.js';

const dir = mkdtempSync(join(tmpdir(), 'ik-cli-key-'));

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('idempotency-kit inspect --key', () => {
  it('finds the record of a request that ran, from its client key, namespace and scope', async () => {
    // Arrange: a payments API scoped by customer, and one scoped by its credentials (the default)
    const file = join(dir, 'payments.db');
    const store = sqliteStore({ database: file });
    try {
      const app = express();
      const byCustomer = idempotency({
        store,
        namespace: 'payments',
        scope: (req) => req.header('x-customer') ?? 'anonymous',
      });
      const byCredentials = idempotency({ store, namespace: 'payments' });
      app.post('/v1/payments', byCustomer.route({ key: 'required' }), (_req, res) => {
        res.status(201).json({ id: 'pay_1' });
      });
      app.post('/v1/refunds', byCredentials.route({ key: 'required' }), (_req, res) => {
        res.status(201).json({ id: 're_1' });
      });
      const base = await listenExpress(app);
      const headers = { 'x-customer': 'cus_42', authorization: 'Bearer sk_test_1' };
      expect((await postWithKey(`${base}/v1/payments`, 'order-42', '{}', headers)).status).toBe(
        201,
      );
      expect((await postWithKey(`${base}/v1/refunds`, 'refund-7', '{}', headers)).status).toBe(201);

      // Act
      const executed = await cli([
        'inspect',
        '--key',
        'order-42',
        '--namespace',
        'payments',
        '--scope',
        'cus_42',
        '--sqlite',
        file,
      ]);
      const otherCustomer = await cli([
        'inspect',
        '--key',
        'order-42',
        '--namespace',
        'payments',
        '--scope',
        'cus_43',
        '--sqlite',
        file,
      ]);
      const credentialScoped = await cli([
        'inspect',
        '--key',
        'refund-7',
        '--namespace',
        'payments',
        '--json',
        '--sqlite',
        file,
      ]);

      // Assert
      expect(executed).toMatchObject({ code: 0, stderr: '' });
      expect(executed.stdout).toMatch(/^[0-9a-f]{64}: completed\n/);
      expect(executed.stdout).toMatch(/the same request gets the stored outcome replayed/);
      expect(otherCustomer).toMatchObject({ code: 0, stderr: '' });
      expect(otherCustomer.stdout).toMatch(/^[0-9a-f]{64}: absent /);
      expect(otherCustomer.stdout).toContain(
        '  derived from --key in namespace "payments" and scope "cus_43": a request in another scope',
      );
      // The default scope is the credentials' digest: not found under the empty scope, and --json prints
      // the inspection alone, as for a storage key.
      expect(credentialScoped).toMatchObject({ code: 0, stderr: '' });
      expect(JSON.parse(credentialScoped.stdout)).toMatchObject({ state: 'absent' });
    } finally {
      await store.close();
    }
  });

  it("finds with --http the record of a request whose route scope looks like a consumer's", async () => {
    // Arrange: a multi-tenant API scoped by the tenant's name, and a tenant named consumer:acme
    const file = join(dir, 'tenants.db');
    const store = sqliteStore({ database: file });
    try {
      const app = express();
      const byTenant = idempotency({
        store,
        namespace: 'payments',
        scope: (req) => req.header('x-tenant') ?? 'none',
      });
      app.post('/v1/payments', byTenant.route({ key: 'required' }), (_req, res) => {
        res.status(201).json({ id: 'pay_1' });
      });
      const base = await listenExpress(app);
      const sent = await postWithKey(`${base}/v1/payments`, 'order-42', '{}', {
        'x-tenant': 'consumer:acme',
      });
      expect(sent.status).toBe(201);
      const inspect = (...extra: string[]) =>
        cli([
          'inspect',
          '--key',
          'order-42',
          '--namespace',
          'payments',
          '--scope',
          'consumer:acme',
          ...extra,
          '--sqlite',
          file,
        ]);

      // Act
      const asHttp = await inspect('--http');
      const asHttpJson = await inspect('--http', '--json');
      const asConsumer = await inspect();

      // Assert: found as an HTTP route's scope; as a consumer's, absent, with the hint to add --http.
      expect(asHttp).toMatchObject({ code: 0, stderr: '' });
      expect(asHttp.stdout).toMatch(/^[0-9a-f]{64}: completed\n/);
      expect(asHttp.stdout).toMatch(/the same request gets the stored outcome replayed/);
      expect(asHttpJson).toMatchObject({ code: 0, stderr: '' });
      expect(JSON.parse(asHttpJson.stdout)).toMatchObject({ state: 'completed' });
      expect(asConsumer).toMatchObject({ code: 0, stderr: '' });
      expect(asConsumer.stdout).toMatch(/^[0-9a-f]{64}: absent /);
      expect(asConsumer.stdout).toContain(
        '  if "consumer:acme" came from an HTTP route\'s scope, not a consumer\'s, add --http',
      );
    } finally {
      await store.close();
    }
  });
});
