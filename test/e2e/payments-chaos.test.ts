/**
 * End-to-end chaos test of the payments example (examples/payments): real processes, real servers. 500
 * payments, each POSTed three times at once and retried until answered, while the API, relay and worker
 * processes are SIGKILLed at random moments and restarted. Pass condition: every payment ends captured and
 * the fake provider recorded exactly one charge per payment (and the API created exactly one payment per
 * key, answering all three POSTs with it).
 *
 * Runs on PostgreSQL + RabbitMQ, PostgreSQL + NATS (three processes each), and the embedded default
 * (SQLite + in-process bus, one process killed and restarted as a whole: the bus cannot cross processes).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { env, requireService } from '../helpers/env.js';
import { type ChaosBackend, embedded, postgresAmqp, postgresNats } from './chaos-backends.js';
import { type ChaosReport, freePort, runChaos } from './chaos-run.js';
import { stopAllProcesses } from './supervised-process.js';

const pendingCleanups = new Set<() => Promise<void>>();

const PAYMENTS = 500;
const OPTIONS = {
  payments: PAYMENTS,
  concurrency: 16,
  killEveryMs: [500, 2000] as [number, number],
  chaosWindowMs: 20_000,
  minLoadMs: 15_000,
  budgetMs: 100_000,
};

function summary(backend: ChaosBackend, report: ChaosReport): string {
  const repeats = report.ledger.charges.filter((c) => c.requests > 1).length;
  return (
    `${backend.name}: load ${report.loadMs} ms, settle ${report.settleMs} ms, kills ${JSON.stringify(report.kills)}, ` +
    `unexpected exits ${JSON.stringify(report.unexpectedExits)}, ` +
    `retries ${JSON.stringify(report.load.retries)}, replayed answers ${report.load.replayed}, ` +
    `provider charges asked again (deduplicated) ${repeats}`
  );
}

function assertPassCondition(report: ChaosReport): void {
  const { load, ledger } = report;
  // The clients: every key answered 201, all three POSTs of a key with the same payment.
  expect(load.unexpected).toEqual([]);
  expect(load.disagreements).toEqual([]);
  expect(load.paymentIds.size).toBe(PAYMENTS);
  // The API: exactly one payment per key, whatever the kills and retries.
  const answered = new Set(load.paymentIds.values());
  expect(answered.size).toBe(PAYMENTS);
  expect(ledger.payments.map((p) => p.id).sort()).toEqual([...answered].sort());
  // Every payment captured...
  expect(ledger.payments.filter((p) => p.status !== 'captured')).toEqual([]);
  // ...and exactly one provider charge per payment, the one the payment records.
  const chargesPerPayment = new Map<string, string[]>();
  for (const charge of ledger.charges) {
    chargesPerPayment.set(charge.paymentId, [
      ...(chargesPerPayment.get(charge.paymentId) ?? []),
      charge.chargeId,
    ]);
  }
  expect(ledger.charges).toHaveLength(PAYMENTS);
  for (const payment of ledger.payments) {
    expect(chargesPerPayment.get(payment.id), payment.id).toEqual([payment.chargeId]);
  }
}

async function run(make: (port: number) => Promise<ChaosBackend>): Promise<void> {
  // Arrange
  const port = await freePort();
  const backend = await make(port);
  pendingCleanups.add(backend.cleanup);
  try {
    // Act
    const report = await runChaos(backend, port, OPTIONS);
    console.log(summary(backend, report));
    // Assert
    try {
      assertPassCondition(report);
      // The chaos really happened: every process was killed at least once mid-load.
      for (const [role, kills] of Object.entries(report.kills))
        expect(kills, role).toBeGreaterThan(0);
    } catch (error) {
      console.error(report.output);
      throw error;
    }
  } finally {
    pendingCleanups.delete(backend.cleanup);
    await backend.cleanup();
  }
}

describe('payments example under SIGKILL chaos', () => {
  beforeAll(async () => {
    await requireService('PostgreSQL', env.databaseUrl);
    await requireService('RabbitMQ', env.amqpUrl);
    await requireService('NATS', env.natsUrl);
  });
  afterAll(async () => {
    // Each run cleans up in its own `finally`; this catches what a timed-out run left behind.
    await stopAllProcesses();
    for (const cleanup of pendingCleanups) await cleanup().catch(() => {});
  });

  it(
    'PostgreSQL + RabbitMQ: every payment captured, exactly one charge each',
    () => run(postgresAmqp),
    120_000,
  );
  it(
    'PostgreSQL + NATS: every payment captured, exactly one charge each',
    () => run(postgresNats),
    120_000,
  );
  it(
    'SQLite + in-process bus: every payment captured, exactly one charge each',
    () => run(embedded),
    120_000,
  );
});
