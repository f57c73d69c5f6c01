/**
 * Fastify's reply fields the plugin reads (`./error-handling.ts`), found by the description of their
 * symbols, as Fastify does not export them. A scan of a reply's own symbols costs about a microsecond, and
 * ran as each keyed handler started and at each send, so the symbols found are remembered per copy of
 * Fastify: its `lib/symbols.js` makes each once, and every reply of it carries the same ones.
 *
 * Per copy rather than per process: two copies of Fastify in one process (an app's, and one a dependency
 * brought) have symbols of the same descriptions, and one's would read nothing on the other's replies. A
 * copy is told by the symbol of its `kReplyIsError`, which the constructor of each of its replies sets,
 * decorated or not; a reply's prototype (one per scope that decorates replies) leads to its copy without a
 * scan.
 * @module
 */
import type { FastifyReply } from 'fastify';

/**
 * The description of `kReplyIsError`: set by the constructor of every reply of the Fastify versions whose
 * layout `./error-handling.ts` checked, so a reply without it has another layout.
 */
export const IS_ERROR = 'fastify.reply.isError';

/** The symbols of one copy of Fastify found so far, by description. */
interface Copy {
  /** Its `kReplyIsError`. */
  readonly marker: symbol;
  readonly symbols: Map<string, symbol>;
}

// Each copy by its `kReplyIsError`: as many entries as copies of Fastify the process loaded.
const copies = new Map<symbol, Copy>();

// Each reply prototype's copy, checked on use by the reply owning that copy's marker (a prototype not
// Fastify's, such as a plain object's, may be shared by replies of several layouts).
const byPrototype = new WeakMap<object, Copy>();

/** The reply's own symbol described `description`, by a scan. */
const scan = (reply: FastifyReply, description: string): symbol | undefined =>
  Object.getOwnPropertySymbols(reply).find((symbol) => symbol.description === description);

/** The copy of Fastify `reply` comes from, or `undefined` for a reply without `kReplyIsError`. */
function copyOf(reply: FastifyReply): Copy | undefined {
  const prototype = Object.getPrototypeOf(reply) as object | null;
  const known = prototype === null ? undefined : byPrototype.get(prototype);
  if (known !== undefined && Object.hasOwn(reply, known.marker)) return known;
  const marker = scan(reply, IS_ERROR);
  if (marker === undefined) return undefined;
  let copy = copies.get(marker);
  if (copy === undefined) {
    copy = { marker, symbols: new Map([[IS_ERROR, marker]]) };
    copies.set(marker, copy);
  }
  if (prototype !== null) byPrototype.set(prototype, copy);
  return copy;
}

/** Whether the reply has Fastify's `kReplyIsError`: the layout `./error-handling.ts` reads. */
export const isLaidOut = (reply: FastifyReply): boolean => copyOf(reply) !== undefined;

/**
 * The reply's own symbol described `description`, or `undefined` when it has none (a field Fastify sets
 * only later, such as `kReplyNextErrorHandler`). Scanned for until one reply of its copy has shown it.
 */
export function ownSymbol(reply: FastifyReply, description: string): symbol | undefined {
  const copy = copyOf(reply);
  const known = copy?.symbols.get(description);
  if (known !== undefined) return Object.hasOwn(reply, known) ? known : undefined;
  const found = scan(reply, description);
  if (found !== undefined) copy?.symbols.set(description, found);
  return found;
}
