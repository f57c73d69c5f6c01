/**
 * The payments example's configuration, read once from the environment. Nothing set means the embedded
 * default: a SQLite file, the in-process bus, and API + relay + worker in one process on 127.0.0.1:3000.
 * @module
 */

/** Which part(s) of the example a process runs. */
export const Role = {
  /** API, relay and worker in one process (the only choice with the in-process bus). */
  All: 'all',
  /** The HTTP API: writes payments and enqueues `payment.initiated`. */
  Api: 'api',
  /** The outbox relay: publishes enqueued messages to the broker. */
  Relay: 'relay',
  /** The worker: consumes `payment.initiated`, charges the provider, marks the payment captured. */
  Worker: 'worker',
} as const;

/** One of the {@link Role} values. */
export type Role = (typeof Role)[keyof typeof Role];

/** Where the messages go. */
export type BrokerConfig =
  | { kind: 'bus' }
  | { kind: 'amqp'; url: string; prefix: string }
  | { kind: 'nats'; url: string; prefix: string; stream: string };

/** The queue (RabbitMQ) or subject (NATS) of `topic`: `<BROKER_PREFIX>.<topic>`. */
export function destination(prefix: string, topic: string): string {
  return `${prefix}.${topic}`;
}

/** Where the payments, the outbox, the provider's ledger and the API's records live. */
export type DatabaseConfig =
  | { kind: 'sqlite'; file: string }
  | { kind: 'postgres'; url: string; schema: string };

/** Everything the example reads from the environment. */
export interface Config {
  /** `ROLE`. @default 'all' */
  role: Role;
  /** `HOST`: the API listens on loopback only unless told otherwise. @default '127.0.0.1' */
  host: string;
  /** `PORT`. @default 3000 */
  port: number;
  /** `DATABASE_URL` (PostgreSQL, schema `PAYMENTS_SCHEMA`) or else `SQLITE_FILE`. @default SQLite '.data/payments.db' */
  database: DatabaseConfig;
  /** `REDIS_URL`: keep the worker's idempotency records in Redis (prefix `REDIS_PREFIX`). @default the database */
  redis: { url: string; prefix: string } | undefined;
  /** `AMQP_URL` (RabbitMQ) or `NATS_URL` (JetStream); names derive from `BROKER_PREFIX`. @default the in-process bus */
  broker: BrokerConfig;
  /** `RELAY_LEASE_MS`: how long a relay keeps claimed rows (a killed relay delays them this much). @default 10000 */
  relayLeaseMs: number;
  /** `WORKER_LEASE_MS`: the worker's claim lease (a killed worker's message waits this much). @default 10000 */
  workerLeaseMs: number;
  /** `ACK_WAIT_MS`: JetStream AckWait of the worker's consumer. @default 10000 */
  ackWaitMs: number;
  /** `POLL_INTERVAL_MS`: the relay's polling fallback. @default 500 */
  pollIntervalMs: number;
  /** `QUIET=1`: log only start-up and errors. @default false */
  quiet: boolean;
}

/** The `payment.initiated` topic, as enqueued. */
export const PAYMENT_INITIATED = 'payment.initiated';

/** The worker's consumer name: the scope of its idempotency records. */
export const WORKER_NAME = 'payments-worker';

/** The namespace of every idempotency record of the example (API and worker; scopes keep them apart). */
export const NAMESPACE = 'payments';

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new Error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`);
  }
  return value;
}

function role(raw: string | undefined): Role {
  const value = (raw ?? Role.All) as Role;
  if (!Object.values(Role).includes(value)) {
    throw new Error(`ROLE must be one of ${Object.values(Role).join(', ')}, got ${raw}`);
  }
  return value;
}

/**
 * Read the configuration.
 * @throws Error on a malformed variable, or the in-process bus with a single role (it cannot cross processes).
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const prefix = env.BROKER_PREFIX || 'payments';
  const broker: BrokerConfig = env.AMQP_URL
    ? { kind: 'amqp', url: env.AMQP_URL, prefix }
    : env.NATS_URL
      ? {
          kind: 'nats',
          url: env.NATS_URL,
          prefix,
          // Stream names allow no dots, spaces or wildcards.
          stream: prefix.replace(/[^A-Za-z0-9_-]/g, '_').toUpperCase(),
        }
      : { kind: 'bus' };
  const config: Config = {
    role: role(env.ROLE),
    host: env.HOST || '127.0.0.1',
    port: integer(env, 'PORT', 3000),
    database: env.DATABASE_URL
      ? { kind: 'postgres', url: env.DATABASE_URL, schema: env.PAYMENTS_SCHEMA || 'payments' }
      : { kind: 'sqlite', file: env.SQLITE_FILE || '.data/payments.db' },
    redis: env.REDIS_URL
      ? { url: env.REDIS_URL, prefix: env.REDIS_PREFIX || 'payments:' }
      : undefined,
    broker,
    relayLeaseMs: integer(env, 'RELAY_LEASE_MS', 10_000),
    workerLeaseMs: integer(env, 'WORKER_LEASE_MS', 10_000),
    ackWaitMs: integer(env, 'ACK_WAIT_MS', 10_000),
    pollIntervalMs: integer(env, 'POLL_INTERVAL_MS', 500),
    quiet: env.QUIET === '1',
  };
  if (config.broker.kind === 'bus' && config.role !== Role.All) {
    throw new Error(
      `ROLE=${config.role} needs a real broker (AMQP_URL or NATS_URL): the in-process bus only ` +
        'connects an API, relay and worker that share one process (ROLE=all).',
    );
  }
  return config;
}
