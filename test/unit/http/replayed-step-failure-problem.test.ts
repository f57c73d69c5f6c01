/**
 * Over HTTP, a step whose result the codec cannot encode (a BigInt): the charge was made, so the step's
 * failure is stored as the key's final outcome and the handler never runs again for the key. A retry used
 * to get that stored failure thrown out of the layer (a `ReplayedError`), which the framework turned into
 * its own error page; the layer now answers it itself, as `application/problem+json` with the stable code
 * `replayed_error`, the same on every retry.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { stepHandlerPost } from '../../helpers/fetch-step-handler.js';

describe.each(['rethrows the step failure', 'answers 500'] as const)(
  'a fetch handler whose step result cannot be encoded, and which then %s',
  (failure) => {
    it('answers every retry with a replayed_error problem and never charges again', async () => {
      // Arrange
      const engine = createIdempotency({ store: memoryStore() });
      let charges = 0;
      const post = stepHandlerPost({
        engine,
        handle: async (context) => {
          await context.step('charge', () => {
            charges++;
            return { amount: 10n };
          });
          return Response.json({ ok: true }, { status: 201 });
        },
        onFailure:
          failure === 'rethrows the step failure'
            ? 'rethrow'
            : () => Response.json({ error: 'internal' }, { status: 500 }),
      });

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
