/**
 * The NATS consumer's local queue: pulls keep `concurrency` messages asked for beyond the free slots (asking
 * only for free slots left each freed slot empty for a round trip: half the throughput through a 4 ms round
 * trip). What arrives with every slot busy waits here with `working()`, starts in arrival order, is handed
 * back (`nak`) on close(), and after `maxWait` (slots that do not free up: hung handlers).
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer, type NatsJsMsg } from '../../../src/nats/index.js';

/** A pull consumer over messages the test stores; like JetStream, it fills the oldest open pull first. */
function fakeServer() {
  const stored: NatsJsMsg[] = [];
  const asked: number[] = [];
  const log: string[] = [];
  type Pull = { left: number; buffer: NatsJsMsg[]; closed: boolean; wake?: () => void };
  const pulls: Pull[] = [];
  const dispatch = () => {
    for (const pull of pulls) {
      while (pull.left > 0 && stored.length > 0) {
        pull.left--;
        pull.buffer.push(stored.shift() as NatsJsMsg);
      }
      pull.wake?.();
    }
  };
  const message = (name: string, deliveryCount: number): NatsJsMsg => ({
    subject: 'orders',
    data: new TextEncoder().encode(name),
    headers: undefined,
    seq: 0,
    info: { deliveryCount, stream: 'ORDERS', streamSequence: Number(name.slice(1)) },
    ack: () => void log.push(`ack ${name}`),
    nak: () => {
      log.push(`nak ${name}`);
      // Redelivered to whichever pull comes next.
      stored.push(message(name, deliveryCount + 1));
      dispatch();
    },
    working: () => void log.push(`working ${name}`),
    term: () => {},
  });
  const fetch = async (options?: { max_messages?: number }) => {
    const pull: Pull = { left: options?.max_messages ?? 1, buffer: [], closed: false };
    asked.push(pull.left);
    pulls.push(pull);
    dispatch();
    const end = () => {
      pull.closed = true;
      if (pulls.includes(pull)) pulls.splice(pulls.indexOf(pull), 1);
      pull.wake?.();
    };
    return {
      async *[Symbol.asyncIterator]() {
        for (;;) {
          const next = pull.buffer.shift();
          if (next !== undefined) {
            yield next;
            continue;
          }
          if (pull.closed || pull.left === 0) return end();
          await new Promise<void>((resolve) => (pull.wake = resolve));
          pull.wake = undefined;
        }
      },
      close: async () => end(),
    };
  };
  const publish = (...names: string[]) => {
    for (const name of names) stored.push(message(name, 1));
    dispatch();
  };
  const consumer = { fetch, info: async () => ({ config: { ack_wait: 30e9 } }) };
  return { consumer, publish, asked, log, stored };
}

/** Handlers that wait until the test releases their key; `started` lists `key#deliveryCount`. */
function gatedHandler() {
  const started: string[] = [];
  const gates = new Map<string, () => void>();
  const handler = async (_message: NatsJsMsg, context: { key: string; deliveryCount: number }) => {
    started.push(`${context.key}#${context.deliveryCount}`);
    await new Promise<void>((resolve) => gates.set(context.key, resolve));
  };
  const release = (key: string) => gates.get(key)?.();
  return { handler, started, release };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const count = (log: string[], entry: string) => log.filter((line) => line === entry).length;

async function start(
  server: ReturnType<typeof fakeServer>,
  handler: ReturnType<typeof gatedHandler>['handler'],
  concurrency: number,
) {
  return idempotentConsumer(server.consumer, handler, {
    name: 'waiting',
    key: (message) => new TextDecoder().decode(message.data),
    idempotency: createIdempotency({ store: memoryStore() }),
    concurrency,
    workingInterval: 20,
    drainTimeout: 1000,
  });
}

describe('NATS consumer: the local queue of messages waiting for a slot', () => {
  it('asks for concurrency and a batch ahead, keeps the waiting ones alive and starts them in arrival order', async () => {
    // Arrange: two slots, both handlers held.
    const server = fakeServer();
    const { handler, started, release } = gatedHandler();
    const running = await start(server, handler, 2);
    // Act
    server.publish('m1', 'm2', 'm3', 'm4', 'm5', 'm6');
    await sleep(150);
    // Assert: two slots free plus three ahead (two, and a batch of one) were asked for; m3 to m5 wait,
    // touched every 20 ms.
    expect(server.asked.reduce((a, b) => a + b, 0)).toBe(5);
    expect(started).toEqual(['m1#1', 'm2#1']);
    for (const key of ['m3', 'm4', 'm5']) {
      expect(count(server.log, `working ${key}`)).toBeGreaterThanOrEqual(3);
    }
    expect(server.stored).toHaveLength(1);
    // A freed slot goes to the oldest waiting message, and the queue is filled up again.
    release('m2');
    await sleep(30);
    expect(started).toEqual(['m1#1', 'm2#1', 'm3#1']);
    release('m1');
    await sleep(30);
    expect(started).toEqual(['m1#1', 'm2#1', 'm3#1', 'm4#1']);
    expect(server.stored).toHaveLength(0);
    for (const key of ['m3', 'm4', 'm5', 'm6']) {
      release(key);
      await sleep(30);
    }
    expect(started).toEqual(['m1#1', 'm2#1', 'm3#1', 'm4#1', 'm5#1', 'm6#1']);
    await running.close();
    expect(server.log.filter((line) => line.startsWith('nak'))).toEqual([]);
  });

  it('hands the waiting messages back on close(), never starting them', async () => {
    // Arrange: one slot held by m1, m2 waiting.
    const server = fakeServer();
    const { handler, started, release } = gatedHandler();
    const running = await start(server, handler, 1);
    server.publish('m1', 'm2');
    await sleep(50);
    expect(started).toEqual(['m1#1']);
    // Act
    const closed = running.close();
    release('m1');
    await closed;
    // Assert
    expect(started).toEqual(['m1#1']);
    expect(server.log).toContain('nak m2');
    expect(server.log).toContain('ack m1');
  });

  it('hands back a message that waited maxWait (nine touches) with no slot freed, and asks for none ahead until one frees', async () => {
    // Arrange: one slot held; m2 waits, touched every 20 ms, for 180 ms at most; one more is asked for.
    const server = fakeServer();
    const { handler, started, release } = gatedHandler();
    const running = await start(server, handler, 1);
    server.publish('m1', 'm2');
    await sleep(50);
    const askedBefore = server.asked.length;
    // Act
    await sleep(300);
    // Assert: m2 is back on the server, for a consumer with a free slot: the open pull was closed, and
    // none was asked for since.
    expect(server.log).toContain('nak m2');
    expect(server.stored.map((message) => message.info.deliveryCount)).toEqual([2]);
    expect(server.asked).toHaveLength(askedBefore);
    expect(started).toEqual(['m1#1']);
    // Once the slot frees, it pulls again and runs the redelivery.
    release('m1');
    await sleep(50);
    expect(started).toEqual(['m1#1', 'm2#2']);
    release('m2');
    await running.close();
  });
});
