/**
 * docs/observability.md is what an operator searches traces by: every span attribute, event and span name
 * the hooks write is on the page, and every `idempotency.*` name the page gives is one the hooks write.
 */
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import {
  ConsumerAttribute,
  IdempotencyAttribute,
  IdempotencyEvent,
  IdempotencySpan,
} from '../../../src/opentelemetry/index.js';

const page = readFileSync(new URL('../../../docs/observability.md', import.meta.url), 'utf8');

it('documents every attribute, event and span name the hooks write, and no other', () => {
  // Arrange
  const written = new Set<string>([
    ...Object.values(IdempotencyAttribute),
    ...Object.values(ConsumerAttribute),
    ...Object.values(IdempotencyEvent),
    ...Object.values(IdempotencySpan),
  ]);
  // Act: every backticked `idempotency.…` name on the page
  const documented = new Set([...page.matchAll(/`(idempotency\.[a-z_.]+)`/g)].map((m) => m[1]));
  // Assert
  expect([...documented].sort()).toEqual([...written].sort());
});
