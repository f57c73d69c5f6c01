/**
 * A JetStream stream and durable pull consumer of their own for one NATS integration test, with names made
 * unique per run, and the way to read back what reached the dead-letter subject.
 */
import { randomUUID } from 'node:crypto';
import {
  AckPolicy,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
  type StoredMsg,
} from '@nats-io/jetstream';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { env, requireService } from '../../helpers/env.js';
import { startTcpProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';

/** One test's stream (`subject` and `dlq` on it) and durable consumer `durable`. */
export interface NatsFixture {
  nc: NatsConnection;
  jsm: JetStreamManager;
  js: JetStreamClient;
  stream: string;
  subject: string;
  dlq: string;
  durable: string;
  /** Publish `body` with `Nats-Msg-Id: id`. */
  publish(id: string, body?: string): Promise<void>;
  /** Messages stored on the dead-letter subject. */
  deadLetters(): Promise<StoredMsg[]>;
  /** Delete the stream and close the connection. */
  destroy(): Promise<void>;
}

/** Create the fixture; `ackWaitMs` is the consumer's AckWait. */
export async function natsFixture(
  label: string,
  ackWaitMs = 5000,
  maxDeliver = -1,
): Promise<NatsFixture> {
  await requireService('NATS', env.natsUrl);
  const id = `${label}-${randomUUID().slice(0, 8)}`;
  const stream = `IK_TEST_${id.replace(/[^A-Za-z0-9]/g, '_')}`;
  const subject = `ik-test.${id}.msgs`;
  const dlq = `ik-test.${id}.dlq`;
  const durable = 'workers';
  const nc = await connect({ servers: env.natsUrl });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: stream, subjects: [subject, dlq] });
  await jsm.consumers.add(stream, {
    durable_name: durable,
    ack_policy: AckPolicy.Explicit,
    filter_subject: subject,
    ack_wait: ackWaitMs * 1_000_000,
    max_deliver: maxDeliver,
  });
  const js = jetstream(nc);
  return {
    nc,
    jsm,
    js,
    stream,
    subject,
    dlq,
    durable,
    async publish(msgId, body = '') {
      const h = headers();
      h.set('Nats-Msg-Id', msgId);
      await js.publish(subject, new TextEncoder().encode(body), { headers: h });
    },
    async deadLetters() {
      const letters: StoredMsg[] = [];
      const info = await jsm.streams.info(stream);
      for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
        const message = await jsm.streams.getMessage(stream, { seq }).catch(() => null);
        if (message !== null && message.subject === dlq) letters.push(message);
      }
      return letters;
    },
    async destroy() {
      await jsm.streams.delete(stream).catch(() => {});
      await nc.close();
    },
  };
}

/**
 * A TCP proxy in front of the NATS server and a connection through it that never reconnects: the link a
 * test cuts or stalls (a publisher's, say), the rest of the test going on over direct connections.
 */
export async function proxiedConnection(): Promise<{
  proxy: TcpProxy;
  connection: NatsConnection;
}> {
  const url = new URL(env.natsUrl.startsWith('nats://') ? env.natsUrl : `nats://${env.natsUrl}`);
  const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port || 4222) });
  const connection = await connect({ servers: `127.0.0.1:${proxy.port}`, reconnect: false });
  return { proxy, connection };
}

/** Wait until `predicate` holds, or fail naming `what` after `ms`. */
export async function until(what: string, predicate: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
