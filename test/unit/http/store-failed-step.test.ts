/**
 * Over HTTP, a step whose recording fails (`saveStep` applied by the store, its answer lost) and a handler
 * that then answers 503 itself, or throws: the layer hands the engine a rejection (a 5xx or a thrown error
 * releases the key), and the engine released the claim with the recorded charge, so the client's retry
 * charged again. The claim is now left to its lease: the retry gets 409 with Retry-After until it ends,
 * then takes the key over and gets the charge replayed.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore, type Store } from '../../../src/index.js';
import { ManualClock } from '../../helpers/clock.js';
import { stepHandlerPost } from '../../helpers/fetch-step-handler.js';

const LEASE_MS = 1000;

describe.each(['answers 503', 'throws'] as const)(
  'a fetch handler whose step could not be recorded, and which then %s',
  (failure) => {
    it('leaves the key to its lease: 409 until it ends, then the charge is replayed, never made again', async () => {
      // Arrange: the first `saveStep` is applied, then fails (a timeout after the write).
      const clock = new ManualClock();
      const inner = memoryStore({ clock });
      let failNext = true;
      const store: Store = {
        ...inner,
        saveStep: async (key, token, name, result) => {
          const saved = await inner.saveStep(key, token, name, result);
          if (!failNext) return saved;
          failNext = false;
          throw new Error('saveStep: timed out');
        },
      };
      const engine = createIdempotency({ store, clock, leaseMs: LEASE_MS, extendLease: false });
      let charges = 0;
      const post = stepHandlerPost({
        engine,
        handle: async (context) => {
          const charge = await context.step('charge', () => `ch_${++charges}`);
          return Response.json({ charge }, { status: 201 });
        },
        onFailure:
          failure === 'throws'
            ? 'rethrow'
            : () => Response.json({ error: 'try again' }, { status: 503 }),
      });

      // Act
      const first = await post().catch((error: unknown) => error);
      const meanwhile = await post();
      clock.advance(LEASE_MS + 1);
      const after = await post();

      // Assert
      if (failure === 'answers 503') expect((first as Response).status).toBe(503);
      else expect(first).toBeInstanceOf(Error);
      expect(meanwhile.status).toBe(409);
      expect(meanwhile.headers.get('retry-after')).toBe('1');
      expect(after.status).toBe(201);
      expect(await after.json()).toEqual({ charge: 'ch_1' });
      expect(charges).toBe(1);
    });
  },
);
