/**
 * Routes declared before the plugin was registered. The plugin joins each route through `onRoute`, which
 * Fastify calls only for routes declared after it; a route declared before runs without a claim, with no
 * error and no 400 for a missing key, even when its `config` asks for `key: 'required'`: a payments API
 * that runs the charge twice. Fastify exposes no route's config outside `onRoute`, so such a route cannot
 * be told apart from one that asks for nothing: every one with a method the plugin covers fails `ready()`.
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { InvalidOptionsError } from '../core/errors.js';

/**
 * The name of the plugin's `onSend` hook. Fastify gives a route the instance's hooks when the app gets
 * ready, routes declared before included: a route listed with this hook by `printRoutes` is in the
 * plugin's scope, whereas one of another encapsulated plugin (which has its own hooks) is not ours to judge.
 * Each registration's hook gets its own name ({@link captureHookName}).
 */
export const CAPTURE_HOOK_NAME = 'idempotencyKitCapture';

let registrations = 0;

/**
 * A name for one registration's capture hook, unique in the process: `printRoutes` shows hooks by name
 * only, and with one name for all, the routes of a sibling scope with its own registration (`/v1` and
 * `/v2`, each registering the plugin with its options) looked like this scope's routes declared before
 * the plugin, and `ready()` failed.
 */
export function captureHookName(): string {
  registrations += 1;
  return `${CAPTURE_HOOK_NAME}_${registrations}`;
}

/** A route as `printRoutes` lists it: its full path, and whether the plugin's hooks apply to it. */
interface ListedRoute {
  path: string;
  inScope: boolean;
}

// `├── /segment (POST)`, after `│   ` or four spaces per level of the tree; a second route at the same
// node (another constraint) repeats the segment, without the branch.
const ROUTE_LINE = /^((?:[│ ] {3})*)(?:[├└]── )?(\S.*?) \(([A-Z]+)\)/;

/**
 * The routes of `method` in `printRoutes({ method, commonPrefix: false })` output, which nests a route
 * under the one whose path is a prefix of its own: the full path is the segments joined. In scope: listed
 * with the hook named `hookName` (quoted, so that `…_1` is not found in `…_12`).
 */
export function listedRoutes(
  tree: string,
  method: string,
  hookName: string = CAPTURE_HOOK_NAME,
): ListedRoute[] {
  const routes: ListedRoute[] = [];
  const paths: string[] = [];
  const hook = `"${hookName}()"`;
  for (const line of tree.split('\n')) {
    const match = ROUTE_LINE.exec(line);
    if (match === null || match[3] !== method) {
      const last = routes.at(-1);
      if (last !== undefined && line.includes(hook)) last.inScope = true;
      continue;
    }
    const depth = match[1]!.length / 4;
    const branch = line.slice(match[1]!.length).startsWith('──', 1);
    const path = branch ? (paths[depth - 1] ?? '') + match[2]! : (paths[depth - 1] ?? match[2]!);
    if (branch) paths[depth] = path;
    routes.push({ path, inScope: false });
  }
  return routes;
}

/**
 * Fail when a route in the plugin's scope with a method it covers was never seen by its `onRoute` hook.
 * @param seen - `METHOD path` of every route the hook saw, with how many times (constraint variants).
 * @param hookName - The name of this registration's capture hook ({@link captureHookName}).
 * @throws InvalidOptionsError naming the routes.
 */
export function checkRouteOrder(
  fastify: FastifyInstance,
  methods: Iterable<string>,
  seen: ReadonlyMap<string, number>,
  hookName: string = CAPTURE_HOOK_NAME,
): void {
  const missed: string[] = [];
  for (const method of methods) {
    const left = new Map(seen);
    const tree = fastify.printRoutes({ method, commonPrefix: false, includeMeta: ['onSend'] });
    for (const { path, inScope } of listedRoutes(tree, method, hookName)) {
      const name = `${method} ${path}`;
      const count = left.get(name) ?? 0;
      if (count > 0) left.set(name, count - 1);
      else if (inScope) missed.push(name);
    }
  }
  if (missed.length === 0) return;
  throw new InvalidOptionsError(
    `idempotencyPlugin: ${missed.join(', ')} ${missed.length === 1 ? 'was' : 'were'} declared before the plugin was registered, so the plugin cannot protect ${missed.length === 1 ? 'it' : 'them'} (Fastify calls its onRoute hook only for routes declared after it), whatever ${missed.length === 1 ? 'its' : 'their'} config says. Register the plugin first (await app.register(idempotencyPlugin, …)), and give a route to leave unprotected config: { idempotency: false }.`,
  );
}
