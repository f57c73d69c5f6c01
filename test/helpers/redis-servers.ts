/**
 * Private Redis servers for the Redis store's tests: single servers (restart, `SCRIPT FLUSH`, `MONITOR`,
 * eviction-policy checks) and a local 3-master Redis Cluster. They run from Debian's `redis-server` on
 * loopback ports 7000–7099 only (cluster bus ports are +10000), each in its own temp dir; every test file
 * uses its own slice of that range so files running in parallel never collide.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** The port slices reserved for each test file (inclusive start, exclusive end). */
export const PORT_SLICES = {
  cluster: [7000, 7020],
  restart: [7020, 7030],
  scriptFlush: [7030, 7040],
  roundTrips: [7040, 7050],
  startupCheck: [7050, 7060],
  outage: [7060, 7070],
  cliCluster: [7070, 7090],
  health: [7090, 7100],
  cliInterrupted: [7200, 7210],
  replicas: [7210, 7220],
  streamsCluster: [7220, 7240],
} as const satisfies Record<string, readonly [number, number]>;

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () =>
      server.close(() => resolve(true)),
    );
  });
}

/** `count` consecutive free ports in `[from, to)` whose cluster bus ports (+10000) are free too. */
export async function freePorts(slice: readonly [number, number], count = 1): Promise<number[]> {
  const [from, to] = slice;
  for (let base = from; base + count <= to; base++) {
    let ok = true;
    for (let port = base; port < base + count && ok; port++) {
      ok = (await portFree(port)) && (await portFree(port + 10_000));
    }
    if (ok) return Array.from({ length: count }, (_, i) => base + i);
  }
  throw new Error(
    `no ${count} free ports in ${from}-${to - 1} (a stale redis-server from an earlier run?)`,
  );
}

/** Resolve when `PING` on `port` answers `PONG`, or throw after `timeoutMs`. */
export async function waitForPing(port: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect({ port, host: '127.0.0.1' });
      socket.setTimeout(500);
      socket.once('connect', () => socket.write('PING\r\n'));
      socket.once('data', (data) => {
        socket.destroy();
        resolve(data.toString().startsWith('+PONG'));
      });
      socket.once('error', () => resolve(false));
      socket.once('timeout', () => {
        socket.destroy();
        resolve(false);
      });
    });
    if (ok) return;
    await sleep(50);
  }
  throw new Error(`redis-server on port ${port} did not answer PING within ${timeoutMs} ms`);
}

/** A redis-server this test started, which it can kill and start again on the same port and dir. */
export class PrivateRedis {
  readonly dir: string;
  private process: ChildProcess | undefined;

  constructor(
    readonly port: number,
    private readonly extraArgs: string[] = [],
    dir?: string,
  ) {
    this.dir = dir ?? mkdtempSync(join(tmpdir(), `idem-redis-${port}-`));
  }

  /** `redis://127.0.0.1:<port>`. */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Start the server and wait until it answers. */
  async start(): Promise<void> {
    const args = [
      '--port',
      String(this.port),
      '--bind',
      '127.0.0.1',
      '--dir',
      this.dir,
      '--save',
      '',
      '--daemonize',
      'no',
      '--logfile',
      join(this.dir, 'redis.log'),
      ...this.extraArgs,
    ];
    this.process = spawn('redis-server', args, { stdio: 'ignore' });
    await waitForPing(this.port);
  }

  /** `kill -9` the server (no shutdown save) and wait until it is gone. */
  async kill(): Promise<void> {
    const child = this.process;
    this.process = undefined;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }

  /** Kill the server and remove its dir. */
  async dispose(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A local 3-master Redis Cluster (no replicas) on consecutive ports. */
export class LocalCluster {
  readonly nodes: PrivateRedis[];

  constructor(readonly ports: number[]) {
    this.nodes = ports.map(
      (port) =>
        new PrivateRedis(port, [
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          'nodes.conf',
          '--appendonly',
          'no',
        ]),
    );
  }

  /** Root nodes for the cluster clients. */
  get rootNodes(): Array<{ host: string; port: number }> {
    return this.ports.map((port) => ({ host: '127.0.0.1', port }));
  }

  /** Start the nodes, create the cluster and wait until every node reports `cluster_state:ok`. */
  async start(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.start()));
    const create = spawnSync(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...this.ports.map((port) => `127.0.0.1:${port}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (create.status !== 0) {
      throw new Error(`redis-cli --cluster create failed: ${create.stdout}\n${create.stderr}`);
    }
    const deadline = Date.now() + 20_000;
    for (const port of this.ports) {
      for (;;) {
        const info = spawnSync('redis-cli', ['-p', String(port), 'cluster', 'info'], {
          encoding: 'utf8',
        });
        if (info.stdout.includes('cluster_state:ok')) break;
        if (Date.now() > deadline)
          throw new Error(`cluster node ${port} never reached cluster_state:ok`);
        await sleep(100);
      }
    }
  }

  /** Kill every node and remove their dirs. */
  async dispose(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.dispose()));
  }
}
