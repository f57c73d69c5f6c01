/**
 * A Redis server that goes away in the middle of a command (a restart, a failover): the command line
 * fails within its bounds, says what it was doing, and says that running it again is safe. A private
 * redis-server holds 20 000 records, so that `stats` reads many pages; a proxy in front of it drops or
 * silences the connection once the scan is under way (after 100 kB of replies), whatever the machine's
 * speed.
 */
import net from 'node:net';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';
import { freePorts, PORT_SLICES, PrivateRedis } from '../../helpers/redis-servers.js';
import { startTcpProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';

type Fault = 'drop' | 'silence';

/** A proxy to `port` that, once 100 kB of replies have passed on a connection, drops or silences it. */
async function faultyProxy(port: number, fault: Fault): Promise<TcpProxy> {
  let faulted = false;
  const proxy: TcpProxy = await startTcpProxy(
    { host: '127.0.0.1', port },
    {
      onReply: (replied) => {
        if (faulted || replied < 100_000) return;
        faulted = true;
        if (fault === 'drop') proxy.drop();
        else proxy.cut();
      },
    },
  );
  return proxy;
}

let redis: PrivateRedis;

beforeAll(async () => {
  const [port] = await freePorts(PORT_SLICES.cliInterrupted);
  redis = new PrivateRedis(port as number);
  await redis.start();
  const client = createClient({ url: redis.url });
  await client.connect();
  const now = Date.now();
  const value = `c|${now * 1000}|${now}|${now + 3_600_000}|2|fp{}`;
  for (let batch = 0; batch < 20; batch++) {
    const pipeline = client.multi();
    for (let i = 0; i < 1000; i++) pipeline.set(`idem:{k${batch}-${i}}`, value, { PX: 3_600_000 });
    await pipeline.execAsPipeline();
  }
  await client.quit();
});

afterAll(async () => {
  await redis?.dispose();
});

describe('a Redis server that goes away mid-command', () => {
  it.each([
    ['node-redis', 'drop'],
    ['ioredis', 'drop'],
    ['node-redis', 'silence'],
    ['ioredis', 'silence'],
  ] as const)(
    '%s, connection fault %s: stats exits 1 in bounded time, saying to run it again',
    async (library, fault) => {
      // Arrange
      const proxy = await faultyProxy(redis.port, fault);
      const url = `redis://127.0.0.1:${proxy.port}`;
      try {
        // Act
        const started = Date.now();
        const run = await cli(['stats', '--redis-url', url, '--redis-client', library]);
        const elapsed = Date.now() - started;
        // Assert: the store's 2 s command timeout bounds a silent server
        expect(run.code).toBe(1);
        expect(run.stdout).toBe('');
        expect(run.stderr).toMatch(/^idempotency-kit stats failed: Redis store: stats /);
        if (fault === 'silence') expect(run.stderr).toMatch(/no answer within 2000 ms/);
        expect(run.stderr).toContain(
          'The store (redis prefix idem:) stopped answering after the command had connected',
        );
        expect(run.stderr).toMatch(/stats changes nothing: run it again\.\n$/);
        expect(elapsed).toBeLessThan(15_000);
      } finally {
        await proxy.close();
      }
    },
  );

  it('does not say so when the server was never reached', async () => {
    // Arrange: a port nothing listens on
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    // Act
    const run = await cli(['stats', '--redis-url', `redis://127.0.0.1:${port}`]);
    // Assert
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/cannot connect to Redis/);
    expect(run.stderr).not.toMatch(/run it again/);
  });
});
