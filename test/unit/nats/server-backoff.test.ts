/**
 * The delay a retry's `nak()` carries, and the shortest answer window, under a JetStream consumer's
 * `backoff` (the server's arithmetic, measured against nats-server in
 * test/integration/nats/consumer-config.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { nakDelayFor, shortestAckWindowMs } from '../../../src/nats/server-backoff.js';

const SECOND = 1_000_000_000;

describe('NATS server backoff', () => {
  it('sends the delay as asked without a backoff', () => {
    const delay = nakDelayFor({ ack_wait: 30 * SECOND });
    expect(delay(1, 250)).toBe(250);
    expect(delay(7, 250)).toBe(250);
  });

  it("takes off what each delivery's entry adds past ack_wait, the last entry past the end", () => {
    const delay = nakDelayFor({
      ack_wait: 1 * SECOND,
      backoff: [1 * SECOND, 4 * SECOND, 6 * SECOND],
    });
    expect(delay(1, 3500)).toBe(3500);
    expect(delay(2, 3500)).toBe(500);
    expect(delay(3, 8000)).toBe(3000);
    expect(delay(9, 8000)).toBe(3000);
  });

  it('never asks for less than 1 ms, nor turns no delay into one', () => {
    const delay = nakDelayFor({ ack_wait: 1 * SECOND, backoff: [1 * SECOND, 4 * SECOND] });
    expect(delay(2, 300)).toBe(1);
    expect(delay(2, 0)).toBe(0);
  });

  it('adds what an entry shorter than ack_wait takes off', () => {
    const delay = nakDelayFor({ ack_wait: 6 * SECOND, backoff: [6 * SECOND, 1 * SECOND] });
    expect(delay(2, 50)).toBe(5050);
  });

  it('gives the shortest window: ack_wait, or a shorter backoff entry', () => {
    expect(shortestAckWindowMs({ ack_wait: 2 * SECOND })).toBe(2000);
    expect(shortestAckWindowMs({ ack_wait: 6 * SECOND, backoff: [6 * SECOND, 1 * SECOND] })).toBe(
      1000,
    );
    expect(shortestAckWindowMs({})).toBeUndefined();
  });
});
