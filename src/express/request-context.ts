/**
 * `req.idempotency` without adding a property to each request.
 *
 * Why: Express gives every request a new prototype (`Object.setPrototypeOf`), after which a property added
 * to the request builds it a map of its own, with a copy of every descriptor, in old space. Assigning
 * `req.idempotency` measured some 40 µs of server CPU per request in `bench/http-cpu.ts` (Express, S2,
 * Redis: +43 µs over the baseline with the assignment, +4 µs without). So, as `capture.ts` does for
 * responses, an accessor is installed once on Express's shared request prototype (the object right above
 * Node's `IncomingMessage.prototype`), and each request's context lives in a WeakMap.
 *
 * The accessor keeps `req.idempotency` an ordinary property to the application: reading it gives the
 * context, and assigning it stores the new value (for that request only). A request that does not inherit
 * from such a prototype (a bare router), or that already has an own `idempotency`, gets a plain property.
 * @module
 */
import { IncomingMessage } from 'node:http';
import type { Request } from 'express';
import type { IdempotencyContext } from '../http/index.js';
import { expressPrototype } from './prototype.js';

const contexts = new WeakMap<object, IdempotencyContext | undefined>();
const installed = new WeakSet<object>();

const accessor: PropertyDescriptor = {
  get(this: object) {
    return contexts.get(this);
  },
  set(this: object, value: IdempotencyContext | undefined) {
    contexts.set(this, value);
  },
  enumerable: false,
  configurable: true,
};

/** Make `req.idempotency` return `context`. */
export function setRequestContext(req: Request, context: IdempotencyContext): void {
  const target = expressPrototype(req, IncomingMessage.prototype);
  if (target !== undefined && !Object.hasOwn(req, 'idempotency')) {
    if (!installed.has(target)) {
      // Another library may have defined `idempotency` on the prototype: leave it, use a plain property.
      if (!Object.hasOwn(target, 'idempotency'))
        Object.defineProperty(target, 'idempotency', accessor);
      installed.add(target);
    }
    if (Object.getOwnPropertyDescriptor(target, 'idempotency')?.get === accessor.get) {
      contexts.set(req, context);
      return;
    }
  }
  req.idempotency = context;
}
