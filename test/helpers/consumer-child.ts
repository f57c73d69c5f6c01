/**
 * A consumer in its own process, for the crash tests: it starts an idempotent consumer (concurrency 1) on
 * the case's resources with a Redis store shared with the test, records a `charge` step, prints
 * `STARTED <key>` once the step is recorded, and then never finishes, until the test kills it with SIGKILL.
 *
 * Configured through the `IK_CONSUMER_CHILD` environment variable (JSON {@link ChildConfig}).
 */
import { createIdempotency } from '../../src/index.js';
import { redisStore } from '../../src/redis/index.js';
import { type BrokerName, openBrokerCase } from './consumer-brokers.js';
import { env } from './env.js';
import { connectClient } from './redis-clients.js';

/** What the child needs. */
export interface ChildConfig {
  broker: BrokerName;
  id: string;
  prefix: string;
  name: string;
  leaseMs: number;
}

const config = JSON.parse(process.env.IK_CONSUMER_CHILD ?? '{}') as ChildConfig;
const { client } = await connectClient('node-redis', env.redisUrl);
const store = redisStore({ client, prefix: config.prefix, checkEvictionPolicy: false });
const brokerCase = await openBrokerCase(config.broker, config.id);
await brokerCase.start(
  async (_message, context) => {
    // A step recorded on the claim before the crash: the redelivery that takes over must not run it again.
    await context.step('charge', () => `charged-by-${process.pid}`);
    process.stdout.write(`STARTED ${context.key}\n`);
    // Hold the claim (the engine's heartbeat keeps the lease alive) until SIGKILL.
    await new Promise(() => {});
  },
  {
    idempotency: createIdempotency({ store, leaseMs: config.leaseMs }),
    name: config.name,
    concurrency: 1,
  },
);
process.stdout.write('READY\n');
