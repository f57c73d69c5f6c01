import { trace } from '@opentelemetry/api';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  IdempotencyAttribute,
  IdempotencyEvent,
  openTelemetryHooks,
} from '../../../src/opentelemetry/index.js';
import { unreachableClaimStore } from '../../helpers/broken-store.js';
import { ManualClock } from '../../helpers/clock.js';
import { crashAfterCharge, manualEngine } from '../../helpers/crashed-step.js';
import { replicationShortStore } from '../../helpers/replication-short-store.js';
import { startTracing } from '../../helpers/tracing.js';

let tracing: ReturnType<typeof startTracing>;
beforeAll(() => {
  tracing = startTracing();
});
afterAll(async () => {
  await tracing.stop();
});
beforeEach(() => {
  tracing.exporter.reset();
});

/** Run `body` inside an active span named `name`, as an instrumented request or message would. */
function inSpan<T>(name: string, body: () => Promise<T>): Promise<T> {
  return trace.getTracer('test').startActiveSpan(name, async (span) => {
    try {
      return await body();
    } finally {
      span.end();
    }
  });
}

describe('openTelemetryHooks', () => {
  it("sets each run's outcome, hashed key and attempt on its own span, also when runs overlap", async () => {
    const store = memoryStore();
    const idempotency = createIdempotency({ store, hooks: openTelemetryHooks() });
    // Concurrent runs share one batched claim: each span must still get its own run's attributes.
    await Promise.all([
      inSpan('first', () => idempotency.run({ key: 'a', payload: 1 }, () => 'ok')),
      inSpan('other', () => idempotency.run({ key: 'b', payload: 1 }, () => 'ok')),
    ]);
    await inSpan('retry', () => idempotency.run({ key: 'a', payload: 1 }, () => 'again'));
    await inSpan('misuse', () => idempotency.run({ key: 'a', payload: 2 }, () => 'other'));
    await inSpan('failing', () =>
      idempotency
        .run({ key: 'c' }, () => {
          throw new Error('declined');
        })
        .catch(() => undefined),
    );

    const [first] = tracing.spans('first');
    const [other] = tracing.spans('other');
    expect(first?.attributes).toMatchObject({
      [IdempotencyAttribute.Namespace]: 'default',
      [IdempotencyAttribute.KeyHash]: idempotency.storageKeyFor('a'),
      [IdempotencyAttribute.Outcome]: 'executed',
      [IdempotencyAttribute.Attempt]: 1,
    });
    expect(other?.attributes[IdempotencyAttribute.KeyHash]).toBe(idempotency.storageKeyFor('b'));
    expect(tracing.spans('retry')[0]?.attributes).toMatchObject({
      [IdempotencyAttribute.Outcome]: 'replayed',
      [IdempotencyAttribute.ReplaySource]: 'cache',
    });
    expect(tracing.spans('misuse')[0]?.attributes[IdempotencyAttribute.Outcome]).toBe('mismatch');
    expect(tracing.spans('failing')[0]?.attributes).toMatchObject({
      [IdempotencyAttribute.Outcome]: 'failed',
      [IdempotencyAttribute.ErrorStored]: false,
    });
    // Never the raw key, anywhere.
    for (const span of tracing.spans()) {
      expect(Object.values(span.attributes)).not.toContain('a');
    }
  });

  it('marks in-progress runs with the remaining lease, and takeovers and lost leases as events', async () => {
    const clock = new ManualClock();
    const idempotency = createIdempotency({
      store: memoryStore({ clock }),
      clock,
      leaseMs: 1000,
      extendLease: false,
      cache: false,
      hooks: openTelemetryHooks(),
    });
    let release!: () => void;
    const held = inSpan('holder', () =>
      idempotency.run(
        { key: 'k' },
        () =>
          new Promise<void>((resolve) => {
            release = resolve;
          }),
      ),
    ).catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 5));
    clock.advance(400);
    await inSpan('duplicate', () => idempotency.run({ key: 'k' }, () => 'dup'));
    clock.advance(601);
    await inSpan('takeover', () => idempotency.run({ key: 'k' }, () => 'mine'));
    release();
    await held;

    expect(tracing.spans('duplicate')[0]?.attributes).toMatchObject({
      [IdempotencyAttribute.Outcome]: 'in_progress',
      [IdempotencyAttribute.RetryAfterMs]: 600,
    });
    const takeover = tracing.spans('takeover')[0];
    expect(takeover?.attributes[IdempotencyAttribute.Attempt]).toBe(2);
    expect(takeover?.events.map((e) => e.name)).toEqual([IdempotencyEvent.Takeover]);
    expect(tracing.spans('holder')[0]?.events.map((e) => e.name)).toEqual([
      IdempotencyEvent.LeaseLost,
    ]);
  });

  it('adds an event per step: recorded with its duration, or replayed by a takeover', async () => {
    const engine = manualEngine(openTelemetryHooks());
    await crashAfterCharge(
      engine,
      'k',
      () => 'ch_1',
      (start) => inSpan('crashed', start),
    );
    await inSpan('resumed', () =>
      engine.idempotency.run({ key: 'k' }, async (ctx) => {
        await ctx.step('charge', () => 'ch_2');
        return ctx.step('ship', () => 'shipped');
      }),
    );
    const resumed = tracing.spans('resumed')[0];
    expect(resumed?.events.map((e) => [e.name, e.attributes])).toEqual([
      [IdempotencyEvent.Takeover, expect.anything()],
      [
        IdempotencyEvent.Step,
        {
          [IdempotencyAttribute.StepName]: 'charge',
          [IdempotencyAttribute.StepReplayed]: true,
          [IdempotencyAttribute.Attempt]: 2,
        },
      ],
      [
        IdempotencyEvent.Step,
        {
          [IdempotencyAttribute.StepName]: 'ship',
          [IdempotencyAttribute.StepReplayed]: false,
          [IdempotencyAttribute.StepDurationMs]: 0,
          [IdempotencyAttribute.Attempt]: 2,
        },
      ],
    ]);
  });

  it("puts a loss the heartbeat finds on the lost run's span, not on the span of the run that armed the timer", async () => {
    const store = memoryStore();
    // A 900 ms lease: the engine's one heartbeat timer for it ticks every 150 ms, first armed by `armer`,
    // whose own lease then has room for a stalled machine.
    const idempotency = createIdempotency({
      store,
      leaseMs: 900,
      cache: false,
      hooks: openTelemetryHooks(),
    });
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    const armer = inSpan('armer', () => idempotency.run({ key: 'armer' }, () => sleep(1100)));
    await sleep(5);
    const lost = inSpan('lost', () =>
      idempotency.run({ key: 'lost' }, async () => {
        // An operator removes the record: the next beat finds the lease gone.
        await store.delete(idempotency.storageKeyFor('lost'));
        await sleep(900);
      }),
    ).catch((error: unknown) => error);
    await Promise.all([armer, lost]);
    expect(tracing.spans('lost')[0]?.events.map((e) => e.name)).toEqual([
      IdempotencyEvent.LeaseLost,
    ]);
    expect(tracing.spans('armer')[0]?.events).toEqual([]);
  });

  it('records a failed store call as an event with its operation and error', async () => {
    const down = unreachableClaimStore();
    const idempotency = createIdempotency({ store: down, hooks: openTelemetryHooks() });
    await inSpan('open', () => idempotency.run({ key: 'k', failOpen: true }, () => 1));
    const [span] = tracing.spans('open');
    expect(span?.attributes[IdempotencyAttribute.Outcome]).toBe('fail_open');
    expect(span?.events[0]).toMatchObject({
      name: IdempotencyEvent.StoreError,
      attributes: {
        [IdempotencyAttribute.Operation]: 'claim',
        'exception.message': 'connection refused',
      },
    });
  });

  it('records a write short of its replicas as an event with its operation and the replicas', async () => {
    // Arrange
    const { store } = replicationShortStore();
    const idempotency = createIdempotency({ store, hooks: openTelemetryHooks() });
    // Act
    const outcome = await inSpan('short', () => idempotency.run({ key: 'k' }, () => 1));
    // Assert
    const [span] = tracing.spans('short');
    expect(span?.attributes[IdempotencyAttribute.Outcome]).toBe('executed');
    expect(span?.events.map((event) => event.name)).toEqual([IdempotencyEvent.ReplicationShort]);
    expect(span?.events[0]?.attributes).toEqual({
      [IdempotencyAttribute.Operation]: 'complete',
      [IdempotencyAttribute.Token]: outcome.status === 'executed' ? outcome.token : -1,
      [IdempotencyAttribute.ReplicasAcknowledged]: 0,
      [IdempotencyAttribute.ReplicasRequired]: 1,
    });
  });

  it('does nothing, and costs nothing, without an active span', async () => {
    const idempotency = createIdempotency({ store: memoryStore(), hooks: openTelemetryHooks() });
    await expect(idempotency.run({ key: 'k' }, () => 1)).resolves.toMatchObject({
      status: 'executed',
    });
    expect(tracing.spans()).toEqual([]);
  });
});
