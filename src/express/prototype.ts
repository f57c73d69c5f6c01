/**
 * Express's shared prototypes: where the adapter installs its hooks once instead of adding properties to
 * each request and response (see `capture.ts` and `request-context.ts` for why).
 * @module
 */

/**
 * The object right above `nodePrototype` (`IncomingMessage.prototype` or `ServerResponse.prototype`) in
 * the prototype chain of `object`: Express's own request or response prototype, which every Express app
 * and sub-app of that copy of Express inherits from. `undefined` when `object` does not inherit from one.
 */
export function expressPrototype(object: object, nodePrototype: object): object | undefined {
  let proto = Object.getPrototypeOf(object) as object | null;
  if (proto === nodePrototype) return undefined;
  while (proto !== null) {
    const up = Object.getPrototypeOf(proto) as object | null;
    if (up === nodePrototype) return proto;
    proto = up;
  }
  return undefined;
}
