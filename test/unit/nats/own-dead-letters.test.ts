/**
 * NATS subject matching, which decides whether a JetStream consumer's filter takes its own dead-letter
 * subject back (own-dead-letters.ts).
 */
import { describe, expect, it } from 'vitest';
import { subjectMatches } from '../../../src/nats/own-dead-letters.js';

describe('subjectMatches', () => {
  it.each([
    ['orders.dlq', 'orders.dlq', true],
    ['orders.*', 'orders.dlq', true],
    ['orders.>', 'orders.dlq', true],
    ['orders.>', 'orders.dlq.eu', true],
    ['>', 'orders.dlq', true],
    ['*.dlq', 'orders.dlq', true],
    ['orders.*', 'orders.dlq.eu', false],
    ['orders.new', 'orders.dlq', false],
    ['orders.>', 'orders', false],
    ['orders.dlq.eu', 'orders.dlq', false],
    ['orders', 'orders.dlq', false],
  ])('%s against %s: %s', (filter, subject, matches) => {
    expect(subjectMatches(filter, subject)).toBe(matches);
  });
});
