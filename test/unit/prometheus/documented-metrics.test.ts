/**
 * docs/observability.md is what an operator builds dashboards and alerts from: every metric the package
 * registers is in its tables with its type and labels, and every metric the tables name is registered.
 */
import { readFileSync } from 'node:fs';
import { Registry } from 'prom-client';
import { expect, it } from 'vitest';
import { memoryStore } from '../../../src/index.js';
import {
  prometheusConsumerHooks,
  prometheusHooks,
  registerStoreStats,
  withStoreMetrics,
} from '../../../src/prometheus/index.js';

const page = readFileSync(new URL('../../../docs/observability.md', import.meta.url), 'utf8');

/** The metric rows of the page's tables: `| \`name\` | type | \`label\`, … | … |`. */
function documentedMetrics(): Map<string, { type: string; labels: string[] }> {
  const rows = new Map<string, { type: string; labels: string[] }>();
  for (const match of page.matchAll(/^\| `(idempotency_[a-z_]+)` \| (\w+) \| ([^|]*) \|/gm)) {
    const [, name, type, labels] = match as unknown as [string, string, string, string];
    rows.set(name, {
      type,
      labels: [...labels.matchAll(/`(\w+)`/g)].map((label) => label[1] as string),
    });
  }
  return rows;
}

it('documents every registered metric with its type and labels, and no other', () => {
  // Arrange: every factory, default prefix, on one registry
  const registry = new Registry();
  prometheusHooks({ registry });
  prometheusConsumerHooks({ registry });
  withStoreMetrics(memoryStore(), { registry });
  registerStoreStats(memoryStore(), { registry });
  // Act
  const registered = new Map(
    registry.getMetricsAsArray().map((metric) => {
      const { name, type, labelNames } = metric as unknown as {
        name: string;
        type: string;
        labelNames: string[];
      };
      return [name, { type, labels: [...labelNames].sort() }];
    }),
  );
  const documented = documentedMetrics();
  // Assert
  expect([...documented.keys()].sort()).toEqual([...registered.keys()].sort());
  for (const [name, { type, labels }] of documented) {
    expect({ name, type, labels: [...labels].sort() }).toEqual({ name, ...registered.get(name) });
  }
});
