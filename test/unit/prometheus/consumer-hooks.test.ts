import { Registry } from 'prom-client';
import { expect, it } from 'vitest';
import { prometheusConsumerHooks } from '../../../src/prometheus/index.js';

it('counts a consumer’s own read errors (a deleted JetStream consumer, a Redis Streams group gone) with its broker errors', async () => {
  // Arrange
  const registry = new Registry();
  const hooks = prometheusConsumerHooks({ registry });

  // Act
  hooks.onConsumerError?.({ consumer: 'shipping', operation: 'consume', error: new Error('gone') });
  hooks.onConsumerError?.({ consumer: 'shipping', operation: 'read', error: new Error('NOGROUP') });
  hooks.onConsumerError?.({ consumer: 'shipping', operation: 'read', error: new Error('NOGROUP') });

  // Assert
  const { values } = await hooks.metrics.brokerErrors.get();
  const byOperation = Object.fromEntries(values.map((v) => [v.labels.operation, v.value]));
  expect(byOperation).toEqual({ consume: 1, read: 2 });
});
