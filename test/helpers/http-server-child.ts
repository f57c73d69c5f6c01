/**
 * Child process of the cross-process HTTP tests: builds its own store on the shared backend, serves the
 * same routes through all four adapters (one port each), and reports every execution to the parent over
 * IPC, so the parent can count executions across processes (and `kill -9` this process mid-handler).
 */
import { randomUUID } from 'node:crypto';
import { createIdempotency, type Store } from '../../src/index.js';
import { allHarnesses } from './http-adapters.js';
import type { TestRoute } from './http-harness.js';

/** The configuration passed in `IK_HTTP_CHILD`. */
export interface HttpChildConfig {
  /** Module exporting `createStore(argument)`. */
  storeModule: string;
  storeArgument: unknown;
  namespace: string;
  leaseMs: number;
}

/** Messages sent to the parent. */
export type HttpChildMessage =
  | { type: 'ready'; ports: Record<string, string> }
  | { type: 'executed'; tag: string; attempt: number; pid: number }
  | { type: 'step'; tag: string; name: string; pid: number }
  | { type: 'recorded'; tag: string; name: string; pid: number };

const config = JSON.parse(process.env.IK_HTTP_CHILD ?? '{}') as HttpChildConfig;
const report = (message: HttpChildMessage) => process.send?.(message);

const routes: TestRoute[] = [
  {
    method: 'POST',
    path: '/work',
    handle: async (req) => {
      report({
        type: 'executed',
        tag: req.header('x-tag') ?? '',
        attempt: req.context?.attempt ?? 0,
        pid: process.pid,
      });
      await new Promise((resolve) => setTimeout(resolve, 100));
      return {
        status: 201,
        body: {
          kind: 'json',
          value: { pid: process.pid, attempt: req.context?.attempt, id: randomUUID() },
        },
      };
    },
  },
  {
    method: 'POST',
    path: '/hang',
    handle: async (req) => {
      report({
        type: 'executed',
        tag: req.header('x-tag') ?? '',
        attempt: req.context?.attempt ?? 0,
        pid: process.pid,
      });
      // The request sent to the victim process hangs until the process is killed.
      if (req.header('x-hang') === '1') await new Promise(() => {});
      return {
        status: 201,
        body: { kind: 'json', value: { pid: process.pid, attempt: req.context?.attempt } },
      };
    },
  },
  {
    method: 'POST',
    path: '/steps',
    handle: async (req) => {
      const tag = req.header('x-tag') ?? '';
      const context = req.context;
      if (context === undefined) throw new Error('/steps needs an idempotency key');
      report({ type: 'executed', tag, attempt: context.attempt, pid: process.pid });
      // A step that "charges": recorded on the claim, so a takeover of this request does not charge again.
      const charge = await context.step('charge', ({ downstreamKey }) => {
        report({ type: 'step', tag, name: 'charge', pid: process.pid });
        return { chargedBy: process.pid, downstreamKey };
      });
      report({ type: 'recorded', tag, name: 'charge', pid: process.pid });
      if (req.header('x-hang') === '1') await new Promise(() => {});
      return {
        status: 201,
        body: { kind: 'json', value: { pid: process.pid, attempt: context.attempt, charge } },
      };
    },
  },
];

const mod = (await import(config.storeModule)) as {
  createStore(arg: unknown): Store | Promise<Store>;
};
const store = await mod.createStore(config.storeArgument);
const engine = createIdempotency({
  store,
  namespace: config.namespace,
  leaseMs: config.leaseMs,
  cache: false,
});
const ports: Record<string, string> = {};
for (const harness of allHarnesses) {
  ports[harness.name] = (await harness.start({ engine, defaults: {}, routes })).url;
}
report({ type: 'ready', ports });
process.on('disconnect', () => process.exit(0));
