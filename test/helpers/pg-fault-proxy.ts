/**
 * A TCP proxy in front of the test PostgreSQL server that fails it at chosen moments:
 * - `arm()` ends a reply the way a terminated backend does, at the worst moment: the next reply that
 *   carries a ReadyForQuery is cut after it and followed, in the same write, by a `FATAL 57P01`
 *   ErrorResponse, then the connection is closed. The client reads both in one TCP read: the reply frees
 *   its connection (the pool hands it to the next caller) and the FATAL arrives before that caller has run
 *   a statement.
 * - `stall()` stops passing the server's replies on (a partitioned server): statements are sent, never
 *   answered, and only the driver's own `query_timeout` ends the wait.
 */
import { once } from 'node:events';
import net from 'node:net';
import { env } from './env.js';

/** The proxy's address and controls. */
export interface FaultProxy {
  /** A connection string for the test database through the proxy. */
  url: string;
  /** Cut the next reply that carries a ReadyForQuery after it, with a FATAL behind it. */
  arm(): void;
  /** Resolves once an armed cut has been written. */
  cut: () => Promise<void>;
  /** From now on, drop every reply of the server. */
  stall(): void;
  close(): Promise<void>;
}

/** The ErrorResponse a backend sends when pg_terminate_backend() ends it. */
function terminationMessage(): Buffer {
  const fields = Buffer.concat([
    Buffer.from('SFATAL\0VFATAL\0C57P01\0', 'latin1'),
    Buffer.from('Mterminating connection due to administrator command\0\0', 'latin1'),
  ]);
  const header = Buffer.alloc(5);
  header.write('E', 0, 'latin1');
  header.writeInt32BE(fields.length + 4, 1);
  return Buffer.concat([header, fields]);
}

/** Where the first complete ReadyForQuery message ends in `data`, or -1. */
function endOfReadyForQuery(data: Buffer): number {
  let offset = 0;
  while (offset + 5 <= data.length) {
    const type = data[offset];
    const length = data.readInt32BE(offset + 1);
    const end = offset + 1 + length;
    if (end > data.length) return -1;
    if (type === 0x5a) return end;
    offset = end;
  }
  return -1;
}

/** Start a proxy to the test database's server on a free loopback port. */
export async function startFaultProxy(): Promise<FaultProxy> {
  const target = new URL(env.databaseUrl);
  let armed = false;
  let stalled = false;
  let signalCut!: () => void;
  const cutWritten = new Promise<void>((resolve) => {
    signalCut = resolve;
  });
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(upstream);
    const closeBoth = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', closeBoth).on('close', closeBoth);
    upstream.on('error', closeBoth).on('close', closeBoth);
    client.on('data', (chunk: Buffer) => upstream.write(chunk));
    // Replies are buffered only while armed, to find a whole ReadyForQuery across TCP chunks.
    let pending = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      if (stalled) return;
      if (!armed) {
        client.write(chunk);
        return;
      }
      pending = Buffer.concat([pending, chunk]);
      const end = endOfReadyForQuery(pending);
      if (end < 0) return;
      armed = false;
      upstream.destroy();
      client.end(Buffer.concat([pending.subarray(0, end), terminationMessage()]));
      signalCut();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  const url = new URL(env.databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    arm: () => {
      armed = true;
    },
    cut: () => cutWritten,
    stall: () => {
      stalled = true;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
