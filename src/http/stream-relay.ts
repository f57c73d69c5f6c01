/**
 * A response body stream relayed to the client as the handler produces it, and captured on the way (up to
 * `maxBodyBytes`): the Fastify, fetch and Hono adapters hand each chunk on at once and hold back only the
 * end of the stream until its outcome is stored, as the Express capture holds `res.end`. A client that
 * retries the moment it sees the end gets the replay, never a 409; a Server-Sent Events route or a long
 * generated answer reaches its client as it is written, not once it has ended.
 *
 * The outcome is decided at the stream's end, never before:
 * - it ends: the body (or, past `maxBodyBytes`, the `response_too_large` marker) is stored, then the end
 *   goes out;
 * - it fails once its head went out: the client got the handler's status and a cut body, and the error goes
 *   on to the server, which cuts the response. The handler answered, so its work is done: the key is judged
 *   by the status it answered with (`Execution.bodyFailed`), never released for a retry to charge a second
 *   time, unless that status would have released it (a 5xx). Whether the head went out is the adapter's
 *   to say (`headSent`): Fastify knows (`reply.raw.headersSent`); a web `Response` handed to its server
 *   counts as sent, since servers send its head before its first chunk (`@hono/node-server` flushes it
 *   when none is ready, as Deno and Bun do). Before the head, the framework answers the error in its
 *   place, the client never sees the handler's status, and the key is released, as for a thrown error (as
 *   Express does for a response destroyed before its head). Once the execution's lease is lost
 *   (`maxExecution`), a stream that stops on the aborted signal is released too, as when its client has
 *   gone (below);
 * - the client goes away: the handler is not stopped and neither is the storing (releasing the key then
 *   would let a retry run beside a handler that still runs). The relay reads the rest of the stream itself
 *   and stores it, so the retry gets the whole body. It stops reading, and passes the cancel on to the
 *   handler's stream, only when there is nothing left to keep: past `maxBodyBytes` (the marker is stored,
 *   as it would be at the end) or once the execution's lease is lost (`maxExecution` passed: nothing is
 *   stored; the execution fails, as a handler that stopped on its aborted signal, so the key is released
 *   if no retry has taken it over yet).
 * @module
 */
import { type BodyCollector, createBodyCollector } from './capture.js';
import type { CapturedResponse, Execution } from './execution.js';

/** One read of a body source: a web stream reader's result, or an async iterator's. */
export interface ChunkRead {
  done?: boolean;
  value?: unknown;
}

/** Where the relay reads the handler's body from. */
export interface ChunkSource {
  /** The next chunk, or `done`. Called again only once the previous call has settled. */
  read(): Promise<ChunkRead>;
  /** Stop the handler's stream (a web stream is cancelled with `reason`, a Node stream destroyed). */
  stop(reason: unknown): void;
}

/** A source already read to its end. */
export const ENDED_SOURCE: ChunkSource = {
  read: () => Promise.resolve({ done: true }),
  stop: () => {},
};

// How many chunks the relay reads on its own (the client gone) before it lets the event loop turn: a
// stream whose chunks are all at hand would otherwise be read in one run of microtasks.
const CHUNKS_PER_TURN = 64;

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * A chunk of a response body stream as bytes: strings as UTF-8, as Node writes them (`@hono/node-server`
 * sends a stream of strings as such).
 * @throws TypeError for anything else (the stream fails, as it would in the server).
 */
export function bytesOf(value: unknown): Uint8Array {
  if (value instanceof Uint8Array) return value;
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  throw new TypeError(
    `A response body stream must produce bytes or strings, not ${value === null ? 'null' : typeof value}`,
  );
}

/**
 * The relay of one response body. The adapter wraps it in the stream type its server reads (a web
 * `ReadableStream`, a Node `Readable`): `next()` for each chunk the client is to get, `abandon()` when the
 * client went away, or when the stream made of it was thrown away unread.
 */
export class BodyRelay {
  private readonly collector: BodyCollector;
  /** Chunks read before the relay was made (the adapter's look-ahead), not yet handed on. */
  private readonly head: Uint8Array[];
  /** The read in flight, if any: the relay reads the rest only once it has settled. */
  private reading: Promise<Uint8Array | null> | undefined;
  /** The outcome was handed to the execution, or the source was stopped: nothing more is read. */
  private over = false;
  /** The source was stopped: what it answers now (a cancel's `done`, a destroy's error) is no outcome. */
  private stopped = false;
  private abandoned = false;

  /**
   * @param response - The status and headers that went out with the head.
   * @param head - Chunks already read from `source`, to hand on first.
   * @param headSent - Whether the response's head went out, read when the stream fails (see the module);
   *   by default it did, as for a web `Response` handed to its server.
   */
  constructor(
    private readonly execution: Execution,
    private readonly response: Pick<CapturedResponse, 'status' | 'headers'>,
    private readonly source: ChunkSource,
    head: Uint8Array[] = [],
    private readonly headSent: () => boolean = () => true,
  ) {
    this.collector = createBodyCollector(execution.policy.maxBodyBytes);
    for (const chunk of head) this.collector.add(chunk, true);
    this.head = head;
  }

  /**
   * The next chunk for the client, or `null` at the end: only once the outcome is stored. Rejects with the
   * source's error once the key is released.
   */
  next(): Promise<Uint8Array | null> {
    const chunk = this.head.shift();
    if (chunk !== undefined) return Promise.resolve(chunk);
    if (this.over) return Promise.resolve(null);
    const reading = this.read();
    this.reading = reading;
    return reading;
  }

  private async read(): Promise<Uint8Array | null> {
    let chunk: Uint8Array | undefined;
    try {
      const next = await this.source.read();
      if (this.stopped) return null;
      if (next.done !== true) chunk = bytesOf(next.value);
    } catch (error) {
      if (this.stopped) return null;
      this.over = true;
      // The stream failed before its end: judged by the handler's status once its head went out; released
      // before that, or when the lease was lost (see the module).
      if (this.headSent() && !this.execution.context.signal.aborted) {
        await this.execution.bodyFailed(this.response.status, error);
      } else await this.execution.fail(error);
      throw error;
    }
    if (chunk === undefined) {
      this.over = true;
      await this.complete(this.collector.body());
      return null;
    }
    // The chunk goes to the client untouched: no copy (the old whole-body read kept them as they were).
    this.collector.add(chunk, true);
    return chunk;
  }

  // `body` undefined: over `maxBodyBytes`, the marker is kept.
  private complete(body: Uint8Array | undefined): Promise<void> {
    return this.execution.finish({ ...this.response, body, bytes: this.collector.bytes });
  }

  /**
   * The client went away (`reason`: the cancel's). The rest of the stream is read and stored all the same;
   * see the module's comment for when the relay stops instead.
   */
  abandon(reason: unknown): void {
    if (this.over || this.abandoned) return;
    this.abandoned = true;
    void this.drain(reason);
  }

  private async drain(reason: unknown): Promise<void> {
    // Made on first use by the engine: only a relay whose client left pays for it.
    const { signal } = this.execution.context;
    const lost = () => {
      if (this.over) return;
      this.stop(signal.reason);
      // Settled as a handler that stopped on its aborted signal would be: without it, the run (and the
      // body captured so far, up to `maxBodyBytes`) stayed pending for as long as the process lived, for
      // every such stream (an event stream bounded by `maxExecution` whose client left). The engine's
      // release is fenced: after a takeover it changes nothing.
      void this.execution.fail(signal.reason);
    };
    if (signal.aborted) return lost();
    signal.addEventListener('abort', lost, { once: true });
    try {
      await this.reading?.catch(() => {});
      for (let read = 1; !this.over; read++) {
        if (this.collector.bytes > this.execution.policy.maxBodyBytes) {
          // Nothing more to keep and no one to send it to: the marker, as at the end, and the handler's
          // stream is told, so that it frees what it holds (a cursor, a file, an upstream request).
          this.stop(reason);
          await this.complete(undefined);
          return;
        }
        // A failure has settled the execution already.
        if ((await this.next().catch(() => null)) === null) return;
        if (read % CHUNKS_PER_TURN === 0) await nextTurn();
      }
    } finally {
      signal.removeEventListener('abort', lost);
    }
  }

  private stop(reason: unknown): void {
    if (this.over) return;
    this.over = true;
    this.stopped = true;
    this.source.stop(reason);
  }
}
