/**
 * The cross-process takeover storm: several OS processes, each with its own store instance, claim the same
 * keys with a short lease, generation after generation. Each generation's winners never finish (they
 * "crash"), so once their leases have ended every process's next claims race to take the dead records
 * over, while the crashed holders try to complete with their stale tokens. The claim storm's leases never
 * end, so it never reaches this path across processes (a store that guards takeovers with an in-process
 * lock, or hands out tokens from a per-process counter, passes it).
 * @module
 */
import type { fork } from 'node:child_process';
import { InvalidOptionsError } from '../core/errors.js';
import { knownFields, shownValue } from '../core/option-checks.js';
import { assertPositiveMs } from '../store/durations.js';
import { sleep } from './check-kit.js';
import type { CrossProcessOptions } from './claim-storm.js';
import { CROSS_PROCESS_FIELDS, checkOptionNames } from './option-names.js';
import { forkStormWorkers, stormDeadline } from './storm-processes.js';

/** The takeover storm's own settings (`CrossProcessOptions.takeovers`). */
export interface TakeoverStormOptions {
  /** Keys taken over in every generation. @default 16 */
  keys?: number;
  /** Generations of claims: the first claims absent keys, each later one takes the last one's over. @default 4 */
  generations?: number;
  /**
   * The claims' lease, in ms: the storm waits it out between generations, so it sets the storm's length
   * (about `generations` × `leaseMs`). It must be longer than one generation's claims take, or a key's
   * lease may end, and be taken over again rightly, within one generation: raise it for a slow store.
   * @default 1000
   */
  leaseMs?: number;
}

/**
 * Refuse takeover storm settings that would check nothing or never end: unknown fields, a key count or a
 * generation count that is not a positive integer (at least 2 generations: the first only claims), a
 * lease that is not a positive finite number of ms.
 * @throws InvalidOptionsError
 */
export function checkTakeoverStormOptions(storm: TakeoverStormOptions): void {
  if (typeof storm !== 'object' || storm === null) {
    throw new InvalidOptionsError(
      `crossProcess.takeovers must be an object or false, got ${shownValue(storm)}`,
    );
  }
  knownFields(storm, 'crossProcess.takeovers', ['keys', 'generations', 'leaseMs']);
  const { keys, generations, leaseMs } = storm;
  if (keys !== undefined && !(Number.isSafeInteger(keys) && keys > 0)) {
    throw new InvalidOptionsError(
      `crossProcess.takeovers.keys must be a positive integer, got ${shownValue(keys)}`,
    );
  }
  if (generations !== undefined && !(Number.isSafeInteger(generations) && generations >= 2)) {
    throw new InvalidOptionsError(
      `crossProcess.takeovers.generations must be an integer of at least 2, got ${shownValue(generations)}`,
    );
  }
  if (leaseMs !== undefined) assertPositiveMs(leaseMs, 'leaseMs', 'crossProcess.takeovers');
}

/** A key a process won, and the token it won it with. */
export interface TakeoverHold {
  key: string;
  token: number;
}

/** A completion by a holder, and whether the store accepted it. */
export interface TakeoverCompletion extends TakeoverHold {
  ok: boolean;
}

/** One generation's claims, across all processes. */
export interface TakeoverGeneration {
  /** Per key, the tokens of the claims that won it (exactly one for a correct store). */
  winners: Map<string, number[]>;
  /** The completions that the last generation's (crashed) holders tried with their stale tokens. */
  staleCompletes: TakeoverCompletion[];
  /** How long the generation took, from its start to the last process's report, in ms. */
  durationMs: number;
}

/** Result of {@link runTakeoverStorm}. */
export interface TakeoverStormResult {
  /** The lease the claims used, in ms. */
  leaseMs: number;
  /** How long the processes took to start and build their stores, in ms (the storm itself runs after). */
  startupMs: number;
  /** Every generation, in order. */
  generations: TakeoverGeneration[];
  /** The last generation's holders completing their keys (all accepted for a correct store). */
  finalCompletes: TakeoverCompletion[];
  /** Errors reported by the processes. */
  errors: string[];
}

/** The configuration handed to a child through its environment. */
export interface TakeoverWorkerConfig {
  module: string;
  exportName: string;
  argument: unknown;
  keys: string[];
  leaseMs: number;
  seed: number;
  /** How many processes the storm runs: with others, a process leaves the keys it held to them. */
  processes: number;
}

/** What the runner tells a child to do in one generation. */
export interface TakeoverGenerationOrder {
  generation: number;
  /** The keys this child won in the generation before, to complete with their (now stale) tokens. */
  stale: TakeoverHold[];
}

/** What a child sends to the runner. */
export type TakeoverWorkerMessage =
  | { type: 'ready' }
  | {
      type: 'generation';
      generation: number;
      wins: TakeoverHold[];
      stale: TakeoverCompletion[];
      errors: string[];
    }
  | { type: 'finished'; completed: TakeoverCompletion[] };

// Between a generation's last claim and the next generation: the lease, and this much for the time the
// last reply took to arrive and for clocks read a moment apart (backend and runner, one machine).
const MARGIN_MS = 150;

/** A child and the messages it sent that nobody took yet. */
class Child {
  private readonly queue: TakeoverWorkerMessage[] = [];
  private waiting: ((message: TakeoverWorkerMessage) => void) | undefined;
  private failed: ((error: Error) => void) | undefined;
  private exited: Error | undefined;

  constructor(
    readonly child: ReturnType<typeof fork>,
    index: number,
  ) {
    child.on('message', (message: TakeoverWorkerMessage) => {
      const waiting = this.waiting;
      this.waiting = undefined;
      this.failed = undefined;
      if (waiting) waiting(message);
      else this.queue.push(message);
    });
    // 'close' comes after the IPC channel closed: every message the child sent has arrived by then.
    child.once('close', (code, signal) => {
      this.exited = new Error(
        `takeover storm worker ${index} exited (${signal ?? `code ${code}`}) before it reported: ` +
          'see its output above (a TypeScript module needs tsx installed, or `execArgv`)',
      );
      this.failed?.(this.exited);
    });
  }

  /** The child's next message, of `type`. */
  next<T extends TakeoverWorkerMessage['type']>(
    type: T,
  ): Promise<Extract<TakeoverWorkerMessage, { type: T }>> {
    const check = (message: TakeoverWorkerMessage) => {
      if (message.type !== type) {
        throw new Error(`takeover storm worker sent '${message.type}', expected '${type}'`);
      }
      return message as Extract<TakeoverWorkerMessage, { type: T }>;
    };
    const queued = this.queue.shift();
    if (queued !== undefined) return Promise.resolve().then(() => check(queued));
    if (this.exited !== undefined) return Promise.reject(this.exited);
    return new Promise((resolve, reject) => {
      this.waiting = (message) => {
        try {
          resolve(check(message));
        } catch (error) {
          reject(error);
        }
      };
      this.failed = reject;
    });
  }
}

/**
 * Run the takeover storm over `keys` with the processes and factory of `options` (its `claimsPerProcess`
 * and `keys` are the claim storm's, and unused here): see the module's description. The caller judges
 * the result: one winner per key in every generation, tokens that grow from one generation to the next,
 * no stale completion accepted, every final completion accepted.
 */
export async function runTakeoverStorm(
  options: CrossProcessOptions,
  keys: string[],
  storm: TakeoverStormOptions = {},
): Promise<TakeoverStormResult> {
  checkOptionNames(options, 'runTakeoverStorm', CROSS_PROCESS_FIELDS);
  checkTakeoverStormOptions(storm);
  const generations = storm.generations ?? 4;
  const leaseMs = storm.leaseMs ?? 1000;
  const children = forkStormWorkers(
    options,
    'takeover-worker',
    'IDEMPOTENCY_TAKEOVER_CONFIG',
    (base): TakeoverWorkerConfig => ({ ...base, keys, leaseMs, processes: options.processes ?? 4 }),
  ).map((child, index) => new Child(child, index));
  const { deadline, clear } = stormDeadline('takeover storm', options.timeoutMs ?? 50_000);
  const all = <T>(promises: Promise<T>[]) => {
    const settled = Promise.all(promises);
    // When one child fails, the others' pending messages must not surface as unhandled rejections.
    for (const promise of promises) promise.catch(() => {});
    return Promise.race([settled, deadline]);
  };
  try {
    const starting = performance.now();
    await all(children.map((child) => child.next('ready')));
    const result: TakeoverStormResult = {
      leaseMs,
      startupMs: performance.now() - starting,
      generations: [],
      finalCompletes: [],
      errors: [],
    };
    let held: TakeoverHold[][] = children.map(() => []);
    for (let generation = 0; generation < generations; generation++) {
      if (generation > 0) await Promise.race([sleep(leaseMs + MARGIN_MS), deadline]);
      const started = performance.now();
      const replies = children.map((child) => child.next('generation'));
      for (const [i, child] of children.entries()) {
        const order: TakeoverGenerationOrder = { generation, stale: held[i]! };
        child.child.send(order);
      }
      const reports = await all(replies);
      const winners = new Map<string, number[]>(keys.map((key) => [key, []]));
      for (const report of reports) {
        for (const { key, token } of report.wins) winners.get(key)?.push(token);
        result.errors.push(...report.errors);
      }
      result.generations.push({
        winners,
        staleCompletes: reports.flatMap((report) => report.stale),
        durationMs: performance.now() - started,
      });
      held = reports.map((report) => report.wins);
    }
    const finished = children.map((child) => child.next('finished'));
    for (const [i, child] of children.entries()) child.child.send({ finish: held[i]! });
    result.finalCompletes = (await all(finished)).flatMap((report) => report.completed);
    return result;
  } finally {
    clear();
    for (const { child } of children) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }
}
