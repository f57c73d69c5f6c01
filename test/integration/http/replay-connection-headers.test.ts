/**
 * A replay never carries a header the first response made hop-by-hop by naming it in `Connection`
 * (RFC 9110 §7.6.1; RFC 9111 §3.1 forbids a cache to store one), even when the route allow-lists it in
 * `replayHeaders`, on every adapter; nor a cookie or a credential header, whatever the route allows.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { startAllAdapters } from '../../helpers/http-adapters.js';
import type { RunningServer, TestRoute } from '../../helpers/http-harness.js';

let servers: Array<{ name: string; server: RunningServer }> = [];
let runs = 0;

const route: TestRoute = {
  method: 'POST',
  path: '/pay',
  options: { replayHeaders: ['x-hop', 'x-hop-two', 'x-trace'] },
  async handle() {
    runs++;
    return {
      status: 201,
      headers: {
        // Two hop-by-hop names, in the list syntax and another case than the headers themselves.
        connection: 'X-Hop , x-HOP-two',
        'x-hop': 'for this connection only',
        'x-hop-two': 'also',
        'x-trace': 'end-to-end',
        'set-cookie': 'session=first-caller; HttpOnly',
        'www-authenticate': 'Bearer realm="pay"',
        location: '/pay/1',
      },
      body: { kind: 'json', value: { charged: true } },
    };
  },
};

beforeAll(async () => {
  servers = await startAllAdapters(createIdempotency({ store: memoryStore() }), [route]);
});

afterAll(async () => {
  await Promise.all(servers.map(({ server }) => server.close()));
});

describe('a replayed response', () => {
  it('leaves out the headers the first response named in Connection, and keeps the other allowed ones', async () => {
    for (const { name, server } of servers) {
      // Arrange
      const key = randomUUID();
      const post = () =>
        fetch(`${server.url}/pay`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': key },
          body: '{"amount":100}',
        });
      const before = runs;
      const first = await post();
      expect(first.status, name).toBe(201);
      // Act
      const replay = await post();
      // Assert
      expect(runs - before, name).toBe(1);
      expect(replay.headers.get('idempotent-replayed'), name).toBe('true');
      expect(replay.headers.get('x-trace'), name).toBe('end-to-end');
      expect(replay.headers.get('location'), name).toBe('/pay/1');
      expect(replay.headers.get('x-hop'), name).toBeNull();
      expect(replay.headers.get('x-hop-two'), name).toBeNull();
      expect(replay.headers.get('set-cookie'), name).toBeNull();
      expect(replay.headers.get('www-authenticate'), name).toBeNull();
      expect(await replay.json(), name).toEqual({ charged: true });
    }
  });
});
