/**
 * Dead letters on a local 3-master Redis Cluster, through an ioredis `Cluster` client. The letter's `XADD`
 * and the entry's `XACK` go as one script (scripts/dead-letter-2.lua) only where the cluster allows it: a
 * stream whose dead-letter stream shares its slot (a hash tag, `{orders}` and `{orders}:dlq`). Where they
 * do not, the cluster refuses the script (CROSSSLOT) before running it, and the consumer writes the letter
 * and acks in two commands, as before: one letter, the entry acked, either way.
 */
import { randomUUID } from 'node:crypto';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/redis-streams/index.js';
import { freePorts, LocalCluster, PORT_SLICES } from '../../helpers/redis-servers.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer: dead letters on Redis Cluster', () => {
  const run = randomUUID().slice(0, 8);
  let cluster: LocalCluster;
  let client: Cluster;

  beforeAll(async () => {
    cluster = new LocalCluster(await freePorts(PORT_SLICES.streamsCluster, 3));
    await cluster.start();
    client = new Cluster(cluster.rootNodes, { lazyConnect: true });
    client.on('error', () => {});
    await client.connect();
  }, 60_000);

  afterAll(async () => {
    client?.disconnect();
    await cluster?.dispose();
  });

  const slot = async (key: string) => Number(await client.call('CLUSTER', 'KEYSLOT', key));

  it.each([
    ['one slot (a hash tag)', `ik-test:{streams-cluster-${run}}:tagged`],
    ['two slots', `ik-test:streams-cluster-${run}:plain`],
  ])('writes one letter and acks the entry, its stream and DLQ in %s', async (kind, stream) => {
    // Arrange
    const dlq = `${stream}:dlq`;
    expect((await slot(stream)) === (await slot(dlq))).toBe(kind !== 'two slots');
    const letters: Array<string | undefined> = [];
    const brokerErrors: unknown[] = [];
    const consumer = await idempotentConsumer(
      client,
      () => {
        throw new Error('boom');
      },
      {
        stream,
        group: 'workers',
        name: `cluster-dead-letters-${run}`,
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries: 1,
        pollInterval: '20ms',
        hooks: {
          onDeadLetter: (event) => void letters.push(event.key),
          onBrokerError: (event) => void brokerErrors.push(event.error),
        },
      },
    );

    // Act
    await client.call('XADD', stream, '*', 'x-idempotency-key', `dead-${kind}`);

    // Assert
    await waitUntil('the letter', () => letters.length === 1, 10_000);
    expect(await consumer.close()).toBe(true);
    expect(brokerErrors).toEqual([]);
    expect(Number(await client.call('XLEN', dlq))).toBe(1);
    const [count] = (await client.call('XPENDING', stream, 'workers')) as [number];
    expect(Number(count)).toBe(0);
  });
});
