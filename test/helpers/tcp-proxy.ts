/**
 * A TCP proxy on loopback in front of a real server, for store-outage tests: `cut()` stops forwarding, as a
 * network partition looks to a client: connections stay open but nothing comes back, so only the client's
 * own timeouts notice. `restore()` closes the cut connections (their byte streams lost data, so they cannot
 * resume) and forwards again; clients reconnect as after any dropped connection.
 */
import net from 'node:net';

/** A running proxy. */
export interface TcpProxy {
  /** The port clients connect to, on 127.0.0.1. */
  readonly port: number;
  /** Stop forwarding: open and new connections get no answer. */
  cut(): void;
  /** Close the connections open during the cut and forward again. */
  restore(): void;
  /**
   * Hold every byte, both ways, on open and new connections, without dropping any: a link that stalls.
   * {@link TcpProxy.resume} delivers them late, in order, as a link that recovers does.
   */
  pause(): void;
  /** Deliver what {@link TcpProxy.pause} held, in order, and forward again. */
  resume(): void;
  /** Close every open connection at once, as a server that restarts or fails over does; new ones go on. */
  drop(): void;
  /** Close the proxy and every connection. */
  close(): Promise<void>;
}

/** Options of {@link startTcpProxy}. */
export interface TcpProxyOptions {
  /**
   * Called after each chunk of the server's replies is forwarded, with the bytes replied so far on that
   * connection: to cut or drop the link once a command is under way, whatever the machine's speed.
   */
  onReply?: (repliedBytes: number) => void;
}

/** A client connection and its upstream, the two halves of one proxied connection. */
interface Pair {
  client: net.Socket;
  upstream: net.Socket | undefined;
  /** Bytes held by pause(), to the server and to the client, in arrival order. */
  held: Array<{ toServer: boolean; chunk: Buffer }>;
}

/** Start a proxy to `target` (`host:port` of a real server on loopback). */
export async function startTcpProxy(
  target: { host: string; port: number },
  options: TcpProxyOptions = {},
): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  let cut = false;
  let paused = false;

  const destroy = (pair: Pair) => {
    pairs.delete(pair);
    pair.client.destroy();
    pair.upstream?.destroy();
  };

  const server = net.createServer((client) => {
    const pair: Pair = { client, upstream: undefined, held: [] };
    pairs.add(pair);
    client.on('error', () => destroy(pair));
    client.on('close', () => destroy(pair));
    // What a client sends while the link is cut is dropped, never delivered late.
    client.on('data', (chunk: Buffer) => {
      if (paused) pair.held.push({ toServer: true, chunk });
      else if (!cut) pair.upstream?.write(chunk);
    });
    if (cut) return; // connected to nothing until restore() closes it
    const upstream = net.connect(target.port, target.host);
    pair.upstream = upstream;
    let replied = 0;
    upstream.on('data', (chunk: Buffer) => {
      if (paused) {
        pair.held.push({ toServer: false, chunk });
        return;
      }
      if (cut) return;
      client.write(chunk);
      replied += chunk.length;
      options.onReply?.(replied);
    });
    upstream.on('error', () => destroy(pair));
    upstream.on('close', () => destroy(pair));
    // A client's first bytes can arrive before the upstream connects: net buffers writes until then.
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;

  return {
    port,
    cut: () => {
      cut = true;
    },
    restore: () => {
      cut = false;
      for (const pair of [...pairs]) destroy(pair);
    },
    pause: () => {
      paused = true;
    },
    resume: () => {
      paused = false;
      for (const pair of pairs) {
        for (const { toServer, chunk } of pair.held.splice(0)) {
          if (toServer) pair.upstream?.write(chunk);
          else pair.client.write(chunk);
        }
      }
    },
    drop: () => {
      for (const pair of [...pairs]) destroy(pair);
    },
    close: async () => {
      for (const pair of [...pairs]) destroy(pair);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A proxy in front of the Redis server at `redisUrl`, with `url`: the same URL (credentials and database
 * kept) through the proxy, for the client whose link a test cuts.
 */
export async function startRedisProxy(redisUrl: string): Promise<TcpProxy & { url: string }> {
  const target = new URL(redisUrl);
  const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 6379) });
  const through = new URL(redisUrl);
  through.port = String(proxy.port);
  return Object.assign(proxy, { url: through.href });
}
