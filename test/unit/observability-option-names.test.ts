/**
 * The observability factories refuse an option name they do not know, as every other factory does: a
 * misspelt `registri` or `prefx` would leave the global registry or the default prefix in force, and the
 * metrics would land where no scrape reads them.
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { memoryStore } from '../../src/index.js';
import { openTelemetryConsumerHooks, openTelemetryHooks } from '../../src/opentelemetry/index.js';
import {
  prometheusConsumerHooks,
  prometheusHooks,
  registerStoreStats,
  withStoreMetrics,
} from '../../src/prometheus/index.js';

const misspelt = { registri: new Registry() } as unknown as Record<string, never>;

describe('observability factories', () => {
  it.each([
    ['prometheusHooks', () => prometheusHooks(misspelt)],
    ['prometheusConsumerHooks', () => prometheusConsumerHooks(misspelt)],
    ['withStoreMetrics', () => withStoreMetrics(memoryStore(), misspelt)],
    ['registerStoreStats', () => registerStoreStats(memoryStore(), misspelt)],
    ['openTelemetryHooks', () => openTelemetryHooks(misspelt)],
    ['openTelemetryConsumerHooks', () => openTelemetryConsumerHooks(misspelt)],
  ])('%s refuses an option name it does not know, naming the ones it takes', (name, create) => {
    expect(create).toThrow(
      expect.objectContaining({
        code: 'invalid_options',
        message: expect.stringMatching(
          new RegExp(`^${name}: unknown field "registri"; the fields are `),
        ),
      }),
    );
  });
});
