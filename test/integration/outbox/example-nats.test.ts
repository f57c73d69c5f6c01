/**
 * examples/outbox-postgres.ts on JetStream, run as its doc says (`NATS_URL=… npx tsx …`): it delivers its
 * message, and leaves the payments example's stream alone. It used to create a stream named PAYMENTS, the
 * name `NATS_URL=… npm start` gives its own stream with other subjects: whichever of the two ran second
 * then failed (the payments worker at start-up, "consumer filter subject is not a valid subset").
 */
import { execFileSync } from 'node:child_process';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { destination, loadConfig, PAYMENT_INITIATED } from '../../../examples/payments/config.js';
import { env, requireService } from '../../helpers/env.js';

// The names the outbox example uses: its table's schema, and its stream (the name it took before, too).
const EXAMPLE_SCHEMA = 'outbox_example';
const EXAMPLE_STREAM = 'OUTBOX_EXAMPLE';
const payments = loadConfig({ NATS_URL: env.natsUrl }).broker;
if (payments.kind !== 'nats') throw new Error('expected the payments example on NATS');

type Manager = Awaited<ReturnType<typeof jetstreamManager>>;
const streamInfo = (jsm: Manager, name: string) => jsm.streams.info(name).catch(() => undefined);

describe('examples/outbox-postgres.ts on NATS JetStream', () => {
  let nc: Awaited<ReturnType<typeof connect>>;
  let jsm: Manager;
  const pool = new pg.Pool({ connectionString: env.databaseUrl });
  // Only what this test made is removed afterwards: a developer's own runs of either example are kept.
  const existed = { schema: false, exampleStream: false, paymentsStream: false };

  beforeAll(async () => {
    await requireService('NATS', env.natsUrl);
    await requireService('PostgreSQL', env.databaseUrl);
    nc = await connect({ servers: env.natsUrl });
    jsm = await jetstreamManager(nc);
    const { rowCount } = await pool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [
      EXAMPLE_SCHEMA,
    ]);
    existed.schema = rowCount === 1;
    existed.exampleStream = (await streamInfo(jsm, EXAMPLE_STREAM)) !== undefined;
    existed.paymentsStream = (await streamInfo(jsm, payments.stream)) !== undefined;
  });

  afterAll(async () => {
    if (!existed.exampleStream) await jsm?.streams.delete(EXAMPLE_STREAM).catch(() => false);
    if (!existed.paymentsStream) await jsm?.streams.delete(payments.stream).catch(() => false);
    if (!existed.schema) await pool.query(`DROP SCHEMA IF EXISTS ${EXAMPLE_SCHEMA} CASCADE`);
    await pool.end();
    await nc?.close();
  });

  it('delivers its message on a stream that is not the payments example’s', async () => {
    const output = execFileSync(
      process.execPath,
      ['--import', 'tsx', 'examples/outbox-postgres.ts'],
      {
        encoding: 'utf8',
        timeout: 60_000,
        env: { ...process.env, NATS_URL: env.natsUrl, DATABASE_URL: env.databaseUrl, AMQP_URL: '' },
      },
    );
    expect(output).toMatch(/received ik_[0-9a-f]+: \{"paymentId"/);
    expect(output).toMatch(/published ik_[0-9a-f]+ \(attempt 1\)/);
    // The payments example's stream is absent, or has the subjects that example publishes and consumes.
    const info = await streamInfo(jsm, payments.stream);
    expect(info?.config.subjects ?? []).not.toContain(PAYMENT_INITIATED);
    if (info !== undefined) {
      expect(info.config.subjects).toContain(destination(payments.prefix, PAYMENT_INITIATED));
    }
  });
});
