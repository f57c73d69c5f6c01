/**
 * `scopeHeaders` on a transactional route: callers told apart by an API key header get scopes of their
 * own, as with the middleware (test/conformance/http.suite.ts), against a runner that records the claims.
 */
import { describe, expect, it } from 'vitest';
import { transactionalHandler } from '../../../src/fetch/index.js';
import type { TransactionalClaim } from '../../../src/http/index.js';

/** A runner that commits whatever the handler returns, and keeps the claims it was given. */
function recordingRunner() {
  const claims: TransactionalClaim[] = [];
  return {
    claims,
    async runInTransaction(claim: TransactionalClaim, fn: (tx: undefined) => unknown) {
      claims.push(claim);
      return {
        status: 'executed' as const,
        value: await fn(undefined),
        token: 1,
        attempt: 1,
        failedOpen: false,
      };
    },
  };
}

const post = (headers: Record<string, string>) =>
  new Request('http://localhost/payments', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': 'order-1001', ...headers },
    body: '{"amount":100}',
  });

describe('a transactional route with scopeHeaders', () => {
  it('gives callers with other API keys other scopes, and the same key the same scope', async () => {
    // Arrange
    const runner = recordingRunner();
    const POST = transactionalHandler(runner, () => ({ status: 201 }), {
      scopeHeaders: ['X-API-Key'],
    });
    // Act
    for (const apiKey of ['sk_alice', 'sk_mallory', 'sk_alice'])
      await POST(post({ 'x-api-key': apiKey }));
    // Assert
    const [alice, mallory, aliceAgain] = runner.claims.map((claim) => claim.scope);
    expect(alice).not.toBe('');
    expect(mallory).not.toBe(alice);
    expect(aliceAgain).toBe(alice);
  });
});
