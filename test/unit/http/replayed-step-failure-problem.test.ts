/**
 * Over HTTP, a step whose result the codec cannot encode (a BigInt): the charge was made, so the step's
 * failure is stored as the key's final outcome and the handler never runs again for the key. A retry used
 * to get that stored failure thrown out of the layer (a `ReplayedError`), which the framework turned into
 * its own error page; the layer now answers it itself, as `application/problem+json` with the stable code
 * `replayed_error`, the same on every retry.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { idempotencyOf, withIdempotency } from '../../../src/fetch/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';

describe.each(['rethrows the step failure', 'answers 500'] as const)(
  'a fetch handler whose step result cannot be encoded, and which then %s',
  (failure) => {
    it('answers every retry with a replayed_error problem and never charges again', async () => {
      // Arrange
      const engine = createIdempotency({ store: memoryStore() });
      let charges = 0;
      const handler = withIdempotency(
        async (request: Request) => {
          const context = idempotencyOf(request);
          if (context === undefined) throw new Error('no idempotency context');
          try {
            await context.step('charge', () => {
              charges++;
              return { amount: 10n };
            });
            return Response.json({ ok: true }, { status: 201 });
          } catch (error) {
            if (failure === 'rethrows the step failure') throw error;
            return Response.json({ error: 'internal' }, { status: 500 });
          }
        },
        { engine },
      );
      const key = randomUUID();
      const post = () =>
        handler(
          new Request('http://api.test/charges', {
            method: 'POST',
            headers: { 'idempotency-key': key },
          }),
        );

      // Act
      await post().catch((error: unknown) => error);
      const retries = [await post(), await post()];

      // Assert
      expect(charges).toBe(1);
      for (const retry of retries) {
        expect(retry.status).toBe(500);
        expect(retry.headers.get('content-type')).toBe('application/problem+json');
        const problem = (await retry.json()) as { code: string; type: string; detail: string };
        expect(problem.code).toBe('replayed_error');
        expect(problem.type).toMatch(/errors\.md#replayed_error$/);
        expect(problem.detail).toContain('outcome_not_encodable');
      }
    });
  },
);
