/**
 * Fastify's reply symbols, found by description once per copy of Fastify: a reply of a copy whose symbols
 * were found is read without scanning its symbols again, and two copies (two layouts with symbols of the
 * same descriptions) each read their own.
 */
import fastify, { type FastifyReply } from 'fastify';
import { afterEach, expect, it, vi } from 'vitest';
import { IS_ERROR, isLaidOut, ownSymbol } from '../../../src/fastify/reply-symbols.js';

afterEach(() => {
  vi.restoreAllMocks();
});

/** A reply of a copy of Fastify made here: its symbols are new, and described as Fastify's are. */
const copy = () => {
  const isError = Symbol(IS_ERROR);
  const next = Symbol('fastify.reply.nextErrorHandler');
  const make = (state?: unknown) => {
    const reply: Record<symbol, unknown> = { [isError]: false };
    if (state !== undefined) reply[next] = state;
    return reply as unknown as FastifyReply;
  };
  return { isError, next, make };
};

it("finds the symbols of a Fastify reply, decorated or not, and each scope's prototype", async () => {
  // Arrange
  const app = fastify();
  const seen: Array<symbol | undefined> = [];
  app.get('/', (_request, reply) => {
    seen.push(ownSymbol(reply, IS_ERROR), ownSymbol(reply, 'fastify.reply.isRunningOnErrorHook'));
    return isLaidOut(reply);
  });
  await app.register(async (scope) => {
    scope.decorateReply('extra', null);
    scope.get('/decorated', (_request, reply) => {
      seen.push(ownSymbol(reply, IS_ERROR));
      return isLaidOut(reply);
    });
  });
  // Act
  const plain = await app.inject('/');
  const decorated = await app.inject('/decorated');
  await app.close();
  // Assert
  expect([plain.body, decorated.body]).toEqual(['true', 'true']);
  expect(seen[0]?.description).toBe(IS_ERROR);
  expect(seen[1]?.description).toBe('fastify.reply.isRunningOnErrorHook');
  expect(seen[2]).toBe(seen[0]); // one copy of Fastify: one symbol
});

it('reads a field learned from one reply on the next of its copy without a scan', () => {
  // Arrange
  const { next, make } = copy();
  expect(ownSymbol(make('handler'), 'fastify.reply.nextErrorHandler')).toBe(next);
  const scans = vi.spyOn(Object, 'getOwnPropertySymbols');
  // Act
  const found = ownSymbol(make('handler'), 'fastify.reply.nextErrorHandler');
  const absent = ownSymbol(make(), 'fastify.reply.nextErrorHandler');
  const laidOut = isLaidOut(make());
  const scanned = scans.mock.calls.length; // before `expect`, whose comparisons scan too
  // Assert
  expect(scanned).toBe(0);
  expect([found, absent, laidOut]).toEqual([next, undefined, true]);
});

it('keeps two copies apart: each reply is read with its own symbols', () => {
  // Arrange: both copies' replies are plain objects, of one prototype.
  const a = copy();
  const b = copy();
  // Act
  const fromA = ownSymbol(a.make(false), 'fastify.reply.nextErrorHandler');
  const fromB = ownSymbol(b.make(false), 'fastify.reply.nextErrorHandler');
  const againA = ownSymbol(a.make(false), 'fastify.reply.nextErrorHandler');
  // Assert
  expect([fromA, fromB, againA]).toEqual([a.next, b.next, a.next]);
  expect(ownSymbol(a.make(), IS_ERROR)).toBe(a.isError);
  expect(ownSymbol(b.make(), IS_ERROR)).toBe(b.isError);
  expect(isLaidOut({} as FastifyReply)).toBe(false);
});
