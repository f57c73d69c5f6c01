import { randomUUID } from 'node:crypto';
import { redisStore } from '../../src/redis/index.js';
import { defineStoreSuite } from '../../src/testing/index.js';
import { env } from '../helpers/env.js';
import { redisForFile } from '../helpers/redis-file-connection.js';
import { roundTripCounter } from '../helpers/round-trips.js';

const prefix = `idemtest:io:${randomUUID().slice(0, 8)}:`;
const counter = roundTripCounter();
const redis = redisForFile('ioredis', prefix);

defineStoreSuite({
  name: 'redis (ioredis)',
  storeClock: 'backend',
  // stats() SCANs the shared server's whole keyspace: leases longer than the default 250 ms keep the
  // time-based checks deterministic on a loaded machine.
  shortLeaseMs: 600,
  createStore: (checkPrefix) =>
    redisStore({ client: counter.redis(redis.client), prefix: `${prefix}${checkPrefix}` }),
  // Each batch is one script call.
  roundTrips: counter.count,
  crossProcess: {
    module: new URL('../helpers/redis-clients.ts', import.meta.url),
    argument: { lib: 'ioredis', url: env.redisUrl, prefix: `${prefix}storm:` },
    processes: 4,
    claimsPerProcess: 2000,
    keys: 200,
  },
});
