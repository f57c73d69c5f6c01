/**
 * Cross-process HTTP checks on shared stores (SQLite file, Redis, PostgreSQL): 50 concurrent duplicates
 * split over 2 OS processes run exactly once, and a `kill -9` mid-handler is taken over exactly once after
 * the lease, by the same request only (another body under the key is 422), resuming from the steps the
 * crashed request recorded — through every adapter.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HttpChildConfig, HttpChildMessage } from '../../helpers/http-server-child.js';
import { helperPath as helper, sharedStoreBackends } from '../../helpers/shared-store-backends.js';

const ADAPTERS = ['express', 'fastify', 'fetch', 'hono'] as const;
const LEASE_MS = 1500;

interface Child {
  process: ChildProcess;
  ports: Record<string, string>;
}

function startChild(config: HttpChildConfig, executions: HttpChildMessage[]): Promise<Child> {
  const child = fork(helper('http-server-child.ts'), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, IK_HTTP_CHILD: JSON.stringify(config) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    child.on('message', (message: HttpChildMessage) => {
      if (message.type === 'ready') resolve({ process: child, ports: message.ports });
      else executions.push(message);
    });
    child.once('exit', (code) => reject(new Error(`HTTP child exited early (${code})`)));
  });
}

async function post(url: string, key: string, tag: string, hang = false, order = 42) {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'idempotency-key': key,
      'x-tag': tag,
      'content-type': 'application/json',
      ...(hang ? { 'x-hang': '1' } : {}),
    },
    body: JSON.stringify({ order }),
  });
  return {
    status: response.status,
    body: await response.text(),
    contentType: response.headers.get('content-type'),
    replayed: response.headers.get('idempotent-replayed'),
  };
}

const backends = sharedStoreBackends('http-xproc');

for (const backend of backends) {
  describe(`HTTP across processes on ${backend.name}`, () => {
    const executions: HttpChildMessage[] = [];
    const children: Child[] = [];
    let config: HttpChildConfig;

    beforeAll(async () => {
      const { storeModule, storeArgument } = await backend.setup();
      config = {
        storeModule,
        storeArgument,
        namespace: `xproc-${randomUUID()}`,
        leaseMs: LEASE_MS,
      };
      children.push(
        ...(await Promise.all([startChild(config, executions), startChild(config, executions)])),
      );
    });
    afterAll(async () => {
      for (const child of children) child.process.kill('SIGKILL');
      await backend.teardown();
    });
    const ran = (tag: string) => executions.filter((e) => e.type === 'executed' && e.tag === tag);

    it.each(ADAPTERS)(
      'runs 50 concurrent duplicates over 2 processes exactly once (%s)',
      async (adapter) => {
        const key = `k-${randomUUID()}`;
        const tag = randomUUID();
        const responses = await Promise.all(
          Array.from({ length: 50 }, (_, i) =>
            post(`${children[i % 2]!.ports[adapter]}/work`, key, tag),
          ),
        );
        await sleep(100);
        expect(ran(tag)).toHaveLength(1);
        expect(responses.every((r) => r.status === 201 || r.status === 409)).toBe(true);
        const after = await post(`${children[0]!.ports[adapter]}/work`, key, tag);
        expect(after.status).toBe(201);
        expect(after.replayed).toBe('true');
      },
    );

    it('takes over exactly once after a kill -9 mid-handler, once the lease has passed', async () => {
      const victim = await startChild(config, executions);
      const survivor = children[0]!;
      const cases = ADAPTERS.map((adapter) => ({
        adapter,
        key: `k-${randomUUID()}`,
        tag: randomUUID(),
      }));
      for (const c of cases)
        void post(`${victim.ports[c.adapter]}/hang`, c.key, c.tag, true).catch(() => undefined);
      while (cases.some((c) => ran(c.tag).length === 0)) await sleep(10);
      victim.process.kill('SIGKILL');

      // The lease is still live: a retry is refused, not run.
      for (const c of cases) {
        expect((await post(`${survivor.ports[c.adapter]}/hang`, c.key, c.tag)).status).toBe(409);
      }
      await sleep(LEASE_MS + 200);
      // After the lease the key is still reserved for the crashed request: another body is a mismatch on
      // every try, and never runs (guarantee 3 holds against a dead attempt too).
      for (const c of cases) {
        for (const survivorChild of children) {
          const other = await post(
            `${survivorChild.ports[c.adapter]}/hang`,
            c.key,
            c.tag,
            false,
            43,
          );
          expect(other.status).toBe(422);
          expect(other.contentType).toContain('application/problem+json');
          expect(JSON.parse(other.body).code).toBe('key_mismatch');
        }
        expect(ran(c.tag)).toHaveLength(1);
      }
      // Five concurrent retries of the crashed request per adapter, across both surviving processes.
      const retries = await Promise.all(
        cases.flatMap((c) =>
          Array.from({ length: 5 }, (_, i) =>
            post(`${children[i % 2]!.ports[c.adapter]}/hang`, c.key, c.tag),
          ),
        ),
      );
      expect(retries.every((r) => r.status === 201 || r.status === 409)).toBe(true);
      for (const c of cases) {
        // One execution on the victim (killed), exactly one more on a survivor.
        const pids = ran(c.tag).map((e) => (e.type === 'executed' ? e.pid : 0));
        expect(pids).toHaveLength(2);
        expect(pids[0]).toBe(victim.process.pid);
        expect(pids[1]).not.toBe(victim.process.pid);
        const replay = await post(`${survivor.ports[c.adapter]}/hang`, c.key, c.tag);
        expect(replay.status).toBe(201);
        expect(replay.replayed).toBe('true');
        expect(JSON.parse(replay.body).pid).toBe(pids[1]);
      }
    });

    it('resumes after a kill -9 from the steps the crashed request recorded', async () => {
      const victim = await startChild(config, executions);
      const cases = ADAPTERS.map((adapter) => ({
        adapter,
        key: `k-${randomUUID()}`,
        tag: randomUUID(),
      }));
      const charged = (tag: string) => executions.filter((e) => e.type === 'step' && e.tag === tag);
      for (const c of cases)
        void post(`${victim.ports[c.adapter]}/steps`, c.key, c.tag, true).catch(() => undefined);
      // The victim charged and recorded the charge for every request, then hangs: kill it there.
      const recorded = (tag: string) =>
        executions.some((e) => e.type === 'recorded' && e.tag === tag);
      while (cases.some((c) => !recorded(c.tag))) await sleep(10);
      victim.process.kill('SIGKILL');
      await sleep(LEASE_MS + 200);
      const retries = await Promise.all(
        cases.flatMap((c) =>
          Array.from({ length: 3 }, (_, i) =>
            post(`${children[i % 2]!.ports[c.adapter]}/steps`, c.key, c.tag),
          ),
        ),
      );
      expect(retries.every((r) => r.status === 201 || r.status === 409)).toBe(true);
      for (const c of cases) {
        expect(ran(c.tag)).toHaveLength(2);
        // The charge ran once, on the victim: the survivor that took over got its recorded result.
        expect(charged(c.tag)).toHaveLength(1);
        const replay = await post(`${children[0]!.ports[c.adapter]}/steps`, c.key, c.tag);
        expect(replay.status).toBe(201);
        const body = JSON.parse(replay.body);
        expect(body.attempt).toBe(2);
        expect(body.pid).not.toBe(victim.process.pid);
        expect(body.charge.chargedBy).toBe(victim.process.pid);
        expect(body.charge.downstreamKey).toMatch(/^ik_[0-9a-f]{40}$/);
      }
    });
  });
}
