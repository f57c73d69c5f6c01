/**
 * The payments example, end to end: `npm start`.
 *
 * POST /v1/payments writes the payment, claims the Idempotency-Key and enqueues `payment.initiated` in
 * one transaction; the relay publishes the outbox row with its stable id; the worker consumes it
 * idempotently, charges the fake provider with a derived key, and marks the payment captured.
 *
 * Defaults: a SQLite file (`.data/payments.db`), the in-process bus, and all three parts in this process
 * on 127.0.0.1:3000. `DATABASE_URL` (PostgreSQL), `REDIS_URL` (the worker's records), `AMQP_URL` or
 * `NATS_URL` switch backends; `ROLE=api|relay|worker` runs one part (needs a real broker). See
 * docs/payments-example.md. In your code, import from `idempotency-kit/…` instead of `../../src/…`.
 * @module
 */
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { createClient } from 'redis';
import { createIdempotency, type Store } from '../../src/index.js';
import { createRelay, type Relay } from '../../src/outbox/index.js';
import { redisStore } from '../../src/redis/index.js';
import { createApi, listen } from './api.js';
import { type Broker, connectBroker } from './broker.js';
import { type Config, loadConfig, NAMESPACE, Role } from './config.js';
import type { PaymentsDatabase } from './database.js';
import { parseInitiated } from './payment.js';
import { openPostgresDatabase } from './postgres-database.js';
import { createFakeProvider } from './provider.js';
import { openSqliteDatabase } from './sqlite-database.js';
import { createPaymentHandler } from './worker.js';

const config = loadConfig();
const runs = (role: Role) => config.role === Role.All || config.role === role;
const log = (line: string) => {
  if (!config.quiet) console.log(line);
};
// What to stop on shutdown, in this order: the API first (no new payments), then the relay (its batch in
// flight finishes), the worker (its messages in flight finish), and the connections last.
const stops = {
  api: [] as Array<() => Promise<unknown>>,
  relay: [] as Array<() => Promise<unknown>>,
  worker: [] as Array<() => Promise<unknown>>,
  connections: [] as Array<() => Promise<unknown>>,
};

function describe(c: Config): string {
  const db =
    c.database.kind === 'sqlite'
      ? `SQLite ${c.database.file}`
      : `PostgreSQL (schema ${c.database.schema})`;
  const broker =
    c.broker.kind === 'bus'
      ? 'in-process bus'
      : c.broker.kind === 'amqp'
        ? 'RabbitMQ'
        : 'NATS JetStream';
  return `${db}, ${broker}${c.redis ? ', worker records in Redis' : ''}`;
}

async function workerStore(database: PaymentsDatabase): Promise<Store> {
  if (config.redis === undefined) return database.recordStore();
  const client = createClient({ url: config.redis.url });
  client.on('error', (error: Error) => console.error(`Redis: ${error.message}`));
  await client.connect();
  stops.connections.push(async () => client.close());
  return redisStore({ client, prefix: config.redis.prefix });
}

async function startWorker(database: PaymentsDatabase, broker: Broker): Promise<void> {
  const engine = createIdempotency({
    store: await workerStore(database),
    namespace: NAMESPACE,
    // A dead worker's claim is taken over after this; a live one's is extended every third of it.
    leaseMs: config.workerLeaseMs,
  });
  const handle = createPaymentHandler({
    database,
    provider: createFakeProvider({ ledger: database.ledger }),
    onCaptured: (paymentId, chargeId, requests) =>
      log(
        `worker: ${paymentId} captured (${chargeId}${requests > 1 ? `, provider saw the key ${requests}×` : ''})`,
      ),
  });
  const close = await broker.consume((body, context) => handle(parseInitiated(body), context), {
    engine,
    ackWaitMs: config.ackWaitMs,
    onDuplicate: () => log('worker: duplicate message acknowledged without charging'),
  });
  stops.worker.push(close);
}

function startRelay(database: PaymentsDatabase, broker: Broker): Relay {
  const relay = createRelay({
    source: database.outboxSource(),
    publisher: broker.publisher,
    leaseMs: config.relayLeaseMs,
    publishTimeoutMs: Math.max(1, Math.floor(config.relayLeaseMs / 3)),
    pollIntervalMs: config.pollIntervalMs,
    // Short retries: a message refused while another worker holds its key comes back quickly.
    backoff: { initialMs: 200, maxMs: 3000 },
    retentionMs: 24 * 3600_000,
    onPublishFailed: (message, error, retryInMs) =>
      log(`relay: ${message.id} not delivered (${String(error)}), retry in ${retryInMs} ms`),
    onError: (error) => console.error(`relay: ${String(error)}`),
  });
  relay.start();
  stops.relay.push(() => relay.stop());
  return relay;
}

function printUsage(server: Server): void {
  const address = server.address();
  const base =
    typeof address === 'object' && address !== null ? `http://${config.host}:${address.port}` : '';
  const key = `demo-${randomUUID().slice(0, 8)}`;
  const post = `curl -si -X POST ${base}/v1/payments -H 'Content-Type: application/json' -H 'Idempotency-Key: ${key}' -d '{"amount":4200,"currency":"EUR","customer":"cus_42"}'`;
  console.log(`
Payments API on ${base}. Try it:

  # create a payment (201, Location: /v1/payments/pay_…)
  ${post}

  # send it again: the same 201, byte for byte, with Idempotent-Replayed: true; nothing is charged twice
  ${post}

  # the same key with another body: 422 key_mismatch
  ${post.replace('4200', '9900')}

  # no key: 400 missing_key
  curl -si -X POST ${base}/v1/payments -H 'Content-Type: application/json' -d '{"amount":4200,"currency":"EUR","customer":"cus_42"}'

  # the payment, captured by the worker a moment later (use the id from the Location header)
  curl -s ${base}/v1/payments/pay_…
`);
}

async function main(): Promise<void> {
  const database =
    config.database.kind === 'sqlite'
      ? openSqliteDatabase(config.database.file)
      : await openPostgresDatabase({ url: config.database.url, schema: config.database.schema });
  stops.connections.push(() => database.close());
  let broker: Broker | undefined;
  if (runs(Role.Worker) || runs(Role.Relay)) {
    broker = await connectBroker(config.broker, (error) => {
      // Let the supervisor restart us, exactly as after a crash: nothing is lost (outbox, broker).
      console.error(`broker connection lost: ${String(error)}`);
      process.exit(1);
    });
    stops.connections.unshift(() => (broker as Broker).close());
  }
  // The worker subscribes before the relay publishes, and both run before the API accepts requests.
  if (broker !== undefined && runs(Role.Worker)) await startWorker(database, broker);
  if (broker !== undefined && runs(Role.Relay)) startRelay(database, broker);
  if (runs(Role.Api)) {
    const server = await listen(createApi({ database }), config.host, config.port);
    stops.api.push(
      () =>
        new Promise((resolve) => {
          server.close(resolve);
          server.closeIdleConnections();
        }),
    );
    if (config.quiet) console.log(`api listening on ${config.host}:${config.port}`);
    else printUsage(server);
  }
  console.log(
    `payments example ready: role=${config.role}, pid ${process.pid}, ${describe(config)}`,
  );
}

// Graceful stop on Ctrl-C / SIGTERM: stop taking requests, finish the relay's batch and the worker's
// messages, then close connections. A second signal, or 10 s, exits at once.
let stopping = false;
async function shutdown(signal: string): Promise<void> {
  if (stopping) process.exit(1);
  stopping = true;
  console.log(`${signal}: stopping`);
  setTimeout(() => process.exit(1), 10_000).unref();
  for (const stop of [...stops.api, ...stops.relay, ...stops.worker, ...stops.connections]) {
    await stop().catch((error) => console.error(String(error)));
  }
  process.exit(0);
}
process.on('SIGINT', () => void shutdown('SIGINT'));
process.on('SIGTERM', () => void shutdown('SIGTERM'));

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
