import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../../../src/index.js';
import { completeClaimMany } from '../../../src/redis/complete-claim-script.js';
import { redisStore } from '../../../src/redis/index.js';
import { loadScript } from '../../../src/redis/script-runner.js';
import { claim, claimMany, complete, completeMany } from '../../../src/redis/scripts.gen.js';
import { env, requireService } from '../../helpers/env.js';
import { busyEventLoop, idleEventLoop } from '../../helpers/event-loop.js';
import { connectClient, type RedisLib } from '../../helpers/redis-clients.js';
import { freePorts, PORT_SLICES, PrivateRedis } from '../../helpers/redis-servers.js';

// Round trips are counted by the server itself (MONITOR) on a private server, where every command comes
// from the client under test.
let server: PrivateRedis;

/** A MONITOR connection that records the name of every command the server executes. */
class CommandLog {
  private buffer = '';
  readonly commands: string[] = [];
  /** The script SHA of every `EVALSHA`, in order. */
  readonly shas: string[] = [];
  private constructor(private readonly socket: Socket) {
    socket.on('data', (data) => {
      this.buffer += data.toString('latin1');
      const lines = this.buffer.split('\r\n');
      this.buffer = lines.pop() ?? '';
      for (const line of lines) {
        // Commands a script runs are reported too, from client `lua`: only client commands are round trips.
        const match = /^\+\d+\.\d+ \[\d+ ([^\]]*)\] "([^"]+)"(?: "([^"]*)")?/.exec(line);
        if (match === null || match[1] === 'lua') continue;
        const name = match[2]!.toLowerCase();
        this.commands.push(name === 'echo' ? `echo ${match[3]}` : name);
        if (name === 'evalsha') this.shas.push(match[3] ?? '');
      }
    });
  }

  static async open(port: number): Promise<CommandLog> {
    const socket = connect({ port, host: '127.0.0.1' });
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write('MONITOR\r\n');
    const log = new CommandLog(socket);
    await new Promise<void>((resolve) => socket.once('data', () => resolve()));
    return log;
  }

  /** Wait until the server has reported `ECHO <marker>` (sent by the caller after its commands). */
  async until(marker: string): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (!this.commands.includes(`echo ${marker}`)) {
      if (Date.now() > deadline)
        throw new Error(`MONITOR never showed ${marker}: ${this.commands.join(',')}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  close(): void {
    this.socket.destroy();
  }
}

beforeAll(async () => {
  await requireService('Redis', env.redisUrl);
  const [port] = await freePorts(PORT_SLICES.roundTrips);
  server = new PrivateRedis(port!);
  await server.start();
});

afterAll(async () => {
  await server?.dispose();
});

/** Send `ECHO marker` on the client under test: it follows every command the client sent before. */
function echoOn(lib: RedisLib, client: unknown, marker: string): Promise<unknown> {
  return lib === 'node-redis'
    ? (client as { sendCommand(a: string[]): Promise<unknown> }).sendCommand(['ECHO', marker])
    : (client as { call(...a: string[]): Promise<unknown> }).call('ECHO', marker);
}

describe.each<RedisLib>(['node-redis', 'ioredis'])('redis store round trips (%s)', (lib) => {
  it('uses 2 commands per new key, 1 per replay, and 0 when the local cache hits', async () => {
    // Arrange: warm the script cache, then watch the server.
    const connection = await connectClient(lib, server.url);
    const echo = (marker: string) =>
      lib === 'node-redis'
        ? (connection.client as { sendCommand(a: string[]): Promise<unknown> }).sendCommand([
            'ECHO',
            marker,
          ])
        : (connection.client as unknown as { call(...a: string[]): Promise<unknown> }).call(
            'ECHO',
            marker,
          );
    const store = redisStore({ client: connection.client, prefix: `rt:${lib}:` });
    await store.ready;
    const cached = createIdempotency({ store, namespace: `rt-${lib}` });
    const uncached = createIdempotency({ store, namespace: `rt-${lib}`, cache: false });
    await uncached.run({ key: 'warm-up' }, () => 'warm');
    const log = await CommandLog.open(server.port);
    const keys = Array.from({ length: 10 }, (_, i) => `order-${i}`);

    // Act 1: ten new keys.
    for (const key of keys) await cached.run({ key }, () => ({ key }));
    await echo('new-keys');
    await log.until('new-keys');
    const newKeys = log.commands.splice(0);

    // Act 2: ten replays without the local cache.
    for (const key of keys)
      expect((await uncached.run({ key }, () => 'x')).status).toBe('replayed');
    await echo('replays');
    await log.until('replays');
    const replays = log.commands.splice(0);

    // Act 3: ten replays by the engine that completed them: its local cache of completed records answers.
    for (const key of keys) expect((await cached.run({ key }, () => 'x')).status).toBe('replayed');
    await echo('cache');
    await log.until('cache');
    const cacheHits = log.commands.splice(0);
    log.close();
    await connection.close();

    // Assert: claim + complete per new key, one claim per replay, nothing on a cache hit.
    expect(newKeys).toEqual([...keys.flatMap(() => ['evalsha', 'evalsha']), 'echo new-keys']);
    expect(replays).toEqual([...keys.map(() => 'evalsha'), 'echo replays']);
    expect(cacheHits).toEqual(['echo cache']);
  });

  it('sends a burst of concurrent runs as a handful of calls: one claimMany and one completeMany', async () => {
    // Arrange
    const connection = await connectClient(lib, server.url);
    const store = redisStore({ client: connection.client, prefix: `rt-burst:${lib}:` });
    await store.ready;
    const maxInFlight = 4;
    const idempotency = createIdempotency({
      store,
      namespace: `burst-${lib}`,
      batch: { maxBatch: 100, maxInFlight },
    });
    // Warm the script cache with both single and batch scripts (a burst of 10 uses both).
    await Promise.all(
      Array.from({ length: 10 }, (_, i) => idempotency.run({ key: `warm-${i}` }, () => i)),
    );
    const log = await CommandLog.open(server.port);
    const keys = Array.from({ length: 50 }, (_, i) => `burst-${i}`);
    const count = (script: { source: string; numberOfKeys: number | null }) =>
      log.shas.filter((s) => s === loadScript(script).sha).length;

    // Act: 50 runs started in the same turn of the event loop.
    const outcomes = await Promise.all(keys.map((key) => idempotency.run({ key }, () => key)));
    await echoOn(lib, connection.client, 'burst');
    await log.until('burst');
    log.close();
    await connection.close();

    // Assert: every run executed. The 50 claims are made in one tick and go as one claimMany; the
    // completions are made in the tick of the claim replies and go as one completeMany. Instead of 100
    // commands, two, and never a plain command.
    expect(outcomes.map((outcome) => outcome.status)).toEqual(keys.map(() => 'executed'));
    expect(count(claim)).toBe(0);
    expect(count(claimMany)).toBe(1);
    expect(count(completeMany)).toBe(1);
    expect(count(complete)).toBe(0);
    expect(log.commands.filter((name) => name !== 'evalsha')).toEqual(['echo burst']);
    expect(log.commands.length - 1).toBe(log.shas.length);
  });

  it("sends one burst's completions and the next burst's claims as one script call", async () => {
    // Arrange: one call in flight at a time, so the second burst's claims wait for the first's.
    const connection = await connectClient(lib, server.url);
    const store = redisStore({ client: connection.client, prefix: `rt-pair:${lib}:` });
    await store.ready;
    const idempotency = createIdempotency({
      store,
      namespace: `pair-${lib}`,
      batch: { maxBatch: 100, maxInFlight: 1 },
    });
    const runs = (label: string) =>
      Array.from({ length: 20 }, (_, i) => idempotency.run({ key: `${label}-${i}` }, () => i));
    await Promise.all([...runs('warm-a'), ...runs('warm-b')]);
    const log = await CommandLog.open(server.port);
    const count = (script: { source: string; numberOfKeys: number | null }) =>
      log.shas.filter((s) => s === loadScript(script).sha).length;

    // Act: the first burst in this tick, the second in the next one, while the first's claims are out.
    const first = runs('first');
    const second = await new Promise<Array<Promise<unknown>>>((resolve) =>
      process.nextTick(() => resolve(runs('second'))),
    );
    const outcomes = (await Promise.all([...first, ...second])) as Array<{ status: string }>;
    await echoOn(lib, connection.client, 'pair');
    await log.until('pair');
    log.close();
    await connection.close();

    // Assert: three calls for 40 runs: the first claims; the first completions with the second claims;
    // the second completions.
    expect(outcomes.map((outcome) => outcome.status)).toEqual(outcomes.map(() => 'executed'));
    expect(count(claimMany)).toBe(1);
    expect(count(completeClaimMany)).toBe(1);
    expect(count(completeMany)).toBe(1);
    expect(count(claim) + count(complete)).toBe(0);
    expect(log.shas).toHaveLength(3);
  });

  it('keeps one script call in flight while the event loop is busy, and four while it is idle', async () => {
    // Arrange: the store's own batching defaults (4 calls in flight at rest, 1 while busy).
    const connection = await connectClient(lib, server.url);
    const store = redisStore({ client: connection.client, prefix: `rt-busy:${lib}:` });
    await store.ready;
    const idempotency = createIdempotency({ store, namespace: `busy-${lib}` });
    await Promise.all(
      Array.from({ length: 10 }, (_, i) => idempotency.run({ key: `warm-${i}` }, () => i)),
    );
    // Four runs, each started in the tick after the previous one's claim was written: every claim
    // after the first finds a call outstanding (no reply can arrive between ticks).
    async function claimsAloneOverFourTicks(label: string, busy: boolean): Promise<number> {
      const log = await CommandLog.open(server.port);
      if (busy) busyEventLoop();
      const runs: Array<Promise<unknown>> = [];
      for (let i = 0; i < 4; i++) {
        runs.push(idempotency.run({ key: `${label}-${i}` }, () => i));
        await new Promise((resolve) => process.nextTick(resolve));
      }
      const outcomes = (await Promise.all(runs)) as Array<{ status: string }>;
      await echoOn(lib, connection.client, label);
      await log.until(label);
      log.close();
      expect(outcomes.map((outcome) => outcome.status)).toEqual(runs.map(() => 'executed'));
      return log.shas.filter((sha) => sha === loadScript(claim).sha).length;
    }

    // Act
    await idleEventLoop();
    const idle = await claimsAloneOverFourTicks('idle', false);
    const busy = await claimsAloneOverFourTicks('busy', true);
    await connection.close();

    // Assert: idle, each claim went at once as a single-key script; busy, only the first did, and the
    // three that waited went together with it (claim-many or complete-claim-many).
    expect(idle).toBe(4);
    expect(busy).toBe(1);
  });
});
