/**
 * Where the integration tests find their servers, and a check that fails loudly (never a silent skip)
 * when one is not running.
 */
import { connect } from 'node:net';

/** Connection settings, from the environment with loopback defaults. */
export const env = {
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  amqpUrl: process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
  natsUrl: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
};

/**
 * Resolve when `url`'s host:port accepts a TCP connection; otherwise throw an error naming the service and
 * the command that starts it.
 */
export async function requireService(service: string, url: string): Promise<void> {
  const { hostname, port } = new URL(url);
  const ok = await new Promise<boolean>((resolve) => {
    const socket = connect({ host: hostname, port: Number(port), timeout: 2000 });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
  if (!ok) {
    throw new Error(
      `${service} is not reachable at ${hostname}:${port}. Start it with: bash scripts/services.sh up`,
    );
  }
}
