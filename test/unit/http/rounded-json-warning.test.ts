import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpFingerprint } from '../../../src/http/fingerprint.js';

const base = { method: 'POST', path: '/transfers', query: '', contentType: 'application/json' };
const warnings: Array<Error & { code?: string }> = [];
const onWarning = (warning: Error) => warnings.push(warning);
beforeAll(() => {
  process.on('warning', onWarning);
});
afterAll(() => {
  process.off('warning', onWarning);
});

const rounded = () => warnings.filter((w) => w.code === 'IDEMPOTENCY_KIT_ROUNDED_JSON');
// process.emitWarning delivers on the next tick.
const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('the rounded-integer warning', () => {
  it('is not given for safe numbers, BigInts, a kept rawBody or a non-JSON body', async () => {
    // Act
    httpFingerprint({ ...base, body: { account: 2 ** 53 - 1, rate: 0.1 + 0.2 } });
    httpFingerprint({ ...base, body: { account: 9223372036854775807n } });
    httpFingerprint({
      ...base,
      body: { account: 2 ** 63 },
      rawBody: '{"account":9223372036854775807}',
    });
    httpFingerprint({ ...base, contentType: 'application/x-foo', body: { account: 2 ** 63 } });
    await tick();
    // Assert
    expect(rounded()).toHaveLength(0);
  });

  it('is given once per process when a parsed JSON body holds an integer beyond 2^53', async () => {
    // Act
    httpFingerprint({ ...base, body: { account: 2 ** 63 } });
    httpFingerprint({ ...base, body: [{ account: -(2 ** 60) }] });
    await tick();
    // Assert
    expect(rounded()).toHaveLength(1);
    expect(rounded()[0]?.message).toMatch(/rawBody/);
  });
});
