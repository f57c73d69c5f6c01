import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { withIdempotency } from '../../../src/fetch/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { countingStore } from '../../helpers/http-harness.js';

// Header values the fetch API itself accepts: no CR, LF or NUL; surrounding whitespace is trimmed by it.
const headerValue = fc
  .string({ maxLength: 300, unit: 'binary' })
  .filter((s) => !/[\r\n\0]/.test(s) && [...s].every((c) => c.charCodeAt(0) <= 0xff));

function setup() {
  const store = countingStore(memoryStore());
  let executions = 0;
  const handler = withIdempotency(
    async (request: Request) => {
      executions++;
      return Response.json({ got: await request.text() }, { status: 201 });
    },
    { engine: createIdempotency({ store }), key: 'required' },
  );
  return { store, handler, executions: () => executions };
}

describe('fuzzed requests through the fetch adapter', () => {
  it('answers any malformed key with a 400 problem and never reaches the store', async () => {
    await fc.assert(
      fc.asyncProperty(headerValue, async (value) => {
        // Arrange
        const { store, handler, executions } = setup();
        const request = new Request('http://x/orders', {
          method: 'POST',
          headers: { 'idempotency-key': value, 'content-type': 'application/json' },
          body: '{}',
        });
        // Act
        const response = await handler(request);
        // Assert
        if (response.status === 201) {
          expect(store.claims).toBe(1);
          return;
        }
        expect(response.status).toBe(400);
        expect(response.headers.get('content-type')).toBe('application/problem+json');
        expect(store.claims).toBe(0);
        expect(executions()).toBe(0);
      }),
      { numRuns: 500 },
    );
  });

  it('answers any body with the handler once, a replay for the same bytes and 4xx for others, never 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ maxLength: 256 }),
        fc.uint8Array({ maxLength: 256 }),
        fc.constantFrom('application/json', 'application/octet-stream', 'text/plain'),
        async (first, second, contentType) => {
          // Arrange
          const { handler, executions } = setup();
          const send = (body: Uint8Array) =>
            handler(
              new Request('http://x/orders?b=1&a=2', {
                method: 'POST',
                headers: { 'idempotency-key': 'fuzz-key', 'content-type': contentType },
                body,
              }),
            );
          // Act
          const a = await send(first);
          const again = await send(first);
          const b = await send(second);
          // Assert
          expect(a.status).toBe(201);
          expect(again.headers.get('idempotent-replayed')).toBe('true');
          expect(await again.text()).toBe(await a.text());
          expect([201, 422]).toContain(b.status);
          if (Buffer.from(first).equals(Buffer.from(second))) expect(b.status).toBe(201);
          expect(executions()).toBe(1);
        },
      ),
      { numRuns: 300 },
    );
  });
});
