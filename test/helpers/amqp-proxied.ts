/**
 * RabbitMQ confirm channels on connections through TCP proxies of their own, for the fault-injection
 * tests: cut or blackhole one proxy and only that channel's link is lost. Connection and channel errors are
 * expected there and swallowed; `close()` ends every proxy made.
 */
import amqp from 'amqplib';
import { env } from './env.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

/** Makes proxied confirm channels; `close()` closes their proxies. */
export function proxiedAmqpChannels() {
  const proxies: TcpProxy[] = [];
  return {
    /** A confirm channel on a new connection through a new proxy, with that proxy. */
    async open() {
      const target = new URL(env.amqpUrl);
      const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
      proxies.push(proxy);
      const through = new URL(env.amqpUrl);
      through.port = String(proxy.port);
      const connection = await amqp.connect(through.href);
      connection.on('error', () => {});
      const channel = await connection.createConfirmChannel();
      channel.on('error', () => {});
      return { proxy, channel };
    },
    async close() {
      for (const proxy of proxies) await proxy.close();
    },
  };
}
