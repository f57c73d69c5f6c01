/**
 * Capturing what an Express handler writes: `res.json`, `res.send`, `res.end`, `res.write` chunks and piped
 * streams all end in `write`/`end`. Bytes go out as the handler writes them; only the final `end` is held
 * until the outcome is stored, so the client never sees a finished response whose retry could still find
 * the key in progress.
 *
 * Why hooks on a prototype: Express gives every response a new prototype (`Object.setPrototypeOf`), after
 * which V8 gives each response a map of its own, and every property added to one builds a new map with a
 * copy of its 40-odd descriptors, in old space: patching `write` and `end` on each response measured 8-12
 * µs of server CPU per request in `bench/http-cpu.ts` (Express, S2, Redis; more with a large heap). So
 * `writeHead`, `write` and `end` are installed once on Express's shared response prototype (the object
 * right above Node's `ServerResponse.prototype`, which every Express app and sub-app inherits from, so a
 * sub-app swapping prototypes keeps them), and a response is captured by registering it in a WeakMap,
 * which adds nothing to the response itself. A response that is not registered goes straight through.
 *
 * A middleware that ran before this one may have wrapped `res.write` or `res.end` already (compression,
 * for instance): a hook below its wrapper would see what the wrapper writes (compressed bytes) instead of
 * what the handler wrote, so such a response is patched directly, as are responses that do not inherit
 * from Express's prototype (a bare router). One limit of the hooks: a sub-app of *another copy* of
 * Express, mounted under this middleware, swaps in a prototype chain without them.
 *
 * `send`, `json` and `jsonp` are hooked too: they serialize before they write, and a BigInt, a circular
 * object or a `toJSON` that throws makes them throw out of a handler that has done its work. Express's
 * error handler then answers 500 where the handler answered 201, and judged by that 500, the key was
 * released: the retry charged a second time. The capture notes the status the handler answered with, and
 * the key is judged by it (`Execution.answerLost`).
 * @module
 */
import { ServerResponse } from 'node:http';
import type { Response } from 'express';
import {
  type BodyCollector,
  type CapturedResponse,
  createBodyCollector,
  type Execution,
  type HeaderValue,
  keepContentEncoding,
  readAllowedHeaders,
} from '../http/index.js';
import { holdSocket } from './held-socket.js';
import { expressPrototype } from './prototype.js';

type Method = (this: Response, ...args: unknown[]) => unknown;

/** One response being captured. */
class Capture {
  ended = false;
  /**
   * Calls of `write`/`end` made after the handler's `end` while it is held (its outcome being stored),
   * applied in order once it has gone out; `undefined` when none wait, and once it has gone out.
   */
  private late: Array<() => void> | undefined;
  private held = false;
  private collector: BodyCollector;
  /**
   * The response's Content-Encoding when its first bytes reached the capture (`null` before): set then,
   * the bytes are encoded (see `keepContentEncoding`); set only later, a compression middleware mounted
   * before this one encodes after the capture.
   */
  private encoding: HeaderValue | null = null;
  /**
   * The handler removed the Content-Length (`res.removeHeader`): Node then sends the body chunked (or,
   * with Transfer-Encoding removed too, until the connection closes) instead of adding one of its own.
   */
  private lengthRemoved = false;
  /**
   * The status the head went out with, once `writeHead` wrote it: a `res.statusCode` assigned after that
   * changes nothing on the wire, and a 500 assigned then must not release the key of a 201 the client
   * got (its retry would run the handler again).
   */
  private sentStatus: number | undefined;
  /**
   * The status the handler answered with when `res.send`, `res.json` or `res.jsonp` threw on its body,
   * before the response ended: whatever is sent now is an error's reply, not the handler's answer.
   */
  private lostAnswer: number | undefined;

  constructor(
    private readonly execution: Execution,
    private readonly res: Response,
  ) {
    this.collector = createBodyCollector(execution.policy.maxBodyBytes);
  }

  /**
   * The response is over (sent, or its connection gone) and its `end` never reached the capture:
   * - it was sent all the same (it went through a prototype chain without the hooks: a sub-app of another
   *   copy of Express, or Node's own `end` called directly): the client got a response whose bytes are
   *   unknown; keep a marker, so that the key does not stay `in_progress` while the process lives and a
   *   retry is answered `response_not_captured`, never run again;
   * - an error destroyed it after its head went out (a stream piped into it failed: `pipeline` destroys
   *   the response with the source's error): the handler answered with that stream, so its work is done,
   *   and the key is judged by the status it answered with (`Execution.bodyFailed`: a marker, or released
   *   after a 5xx). Destroyed before anything went out (`res.destroy(error)` in place of an answer, or a
   *   stream that failed before its first chunk), nothing tells an answer from an abandoned request: the
   *   key is released, as for a thrown error;
   * - its connection closed without an error (the client went away): the handler may still be running
   *   and end it, which stores the outcome as usual, so nothing is decided here.
   */
  readonly onClose = (): void => {
    if (this.ended) return;
    const { res } = this;
    if (res.writableFinished) {
      this.ended = true;
      warnUncaptured();
      void this.settle(res.statusCode, () => this.execution.uncaptured(res.statusCode));
    } else if (res.errored !== null && res.errored !== undefined) {
      this.ended = true;
      const { errored } = res;
      const status = this.sentStatus ?? res.statusCode;
      void this.settle(status, () =>
        res.headersSent ? this.execution.bodyFailed(status, errored) : this.execution.fail(errored),
      );
    }
  };

  /**
   * Settle the execution with `outcome`, unless the handler's answer was lost (`lostAnswer`): `sent`,
   * then, is the status of an error's reply, and the key is judged by the answer instead.
   */
  private settle(sent: number, outcome: () => Promise<void>): Promise<void> {
    if (this.lostAnswer === undefined) return outcome();
    return this.execution.answerLost(this.lostAnswer, sent);
  }

  /**
   * `res.send`, `res.json` or `res.jsonp` through the capture (`method`: the one it wraps): a throw from it
   * before the response ended (its serializer's) keeps the status the handler answered with.
   */
  answer(method: Method, args: unknown[]): unknown {
    const status = this.res.statusCode;
    try {
      return method.apply(this.res, args);
    } catch (error) {
      if (!this.ended) this.lostAnswer ??= status;
      throw error;
    }
  }

  /** A chunk handed to `write` or `end`, with the encoding given for a string. */
  add(chunk: unknown, encoding: unknown): void {
    if (typeof chunk === 'string') {
      const charset = typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8';
      this.firstBytes();
      this.collector.add(Buffer.from(chunk, charset), true);
    } else if (chunk instanceof Uint8Array) {
      this.firstBytes();
      this.collector.add(chunk);
    }
  }

  /** The head went out (`writeHead`, called by Node itself for an implicit head). */
  headWritten(): void {
    this.sentStatus ??= this.res.statusCode;
  }

  /** A header the handler removed (`res.removeHeader(name)`). */
  removed(name: unknown): void {
    if (typeof name === 'string' && name.toLowerCase() === 'content-length') {
      this.lengthRemoved = true;
    }
  }

  private firstBytes(): void {
    if (this.encoding === null) this.encoding = this.res.getHeader('content-encoding');
  }

  /**
   * `res.write` through the capture (`write`: the method it wraps). While the handler's `end` is held, a
   * `write` (or an `end`, below) made now by an error handler, or by a `next()` that reaches the 404
   * handler, would go out before the held bytes: it is applied after them instead, where Node handles it
   * as it handles any call after `end`.
   */
  write(write: Method, args: unknown[]): unknown {
    if (!this.ended) this.add(args[0], args[1]);
    else if (this.held) {
      this.later(() => write.apply(this.res, args));
      return false;
    }
    return write.apply(this.res, args);
  }

  /** `res.end` through the capture (`end`: the method it wraps): the handler's first one is held. */
  end(end: Method, args: unknown[]): unknown {
    if (this.held) this.later(() => end.apply(this.res, args));
    else if (this.ended) return end.apply(this.res, args);
    else this.hold(end, args);
    return this.res;
  }

  /**
   * Writing the head of the handler's answer threw (a `writeHead` listener, such as a session middleware
   * serializing its cookie with on-headers): nothing went out, and the error goes from the handler's `end`
   * to Express's error handler. The answer is lost after the handler's work, and the capture starts over
   * for the error's reply. Left held, that reply waited behind an `end` that never went out: the client
   * got no answer, and the key stayed in progress.
   */
  private headFailed(answered: number): void {
    this.lostAnswer ??= answered;
    this.ended = false;
    this.held = false;
    this.collector = createBodyCollector(this.execution.policy.maxBodyBytes);
  }

  /** Apply `call` once the held `end` has gone out. */
  private later(call: () => void): void {
    if (this.late === undefined) this.late = [call];
    else this.late.push(call);
  }

  /**
   * The handler's `end`: commit the head, store the response, then let `end` send its last bytes. The
   * head is committed at once, as Node's own `end` would: `res.headersSent` is true from here on, so an
   * error handler's `if (res.headersSent) return next(err)` and Express's 404 handler see a response that
   * was sent, not one they may still replace (the client would get their 500 or 404 while the 201 is
   * what the key replays).
   */
  private hold(end: Method, args: unknown[]): void {
    const { res } = this;
    this.ended = true;
    this.held = true;
    this.add(args[0], args[1]);
    const headers = readAllowedHeaders(this.execution.policy.replayHeaders, (name) =>
      res.getHeader(name),
    );
    keepContentEncoding(headers, this.encoding);
    const response: CapturedResponse = {
      status: this.sentStatus ?? res.statusCode,
      headers,
      body: this.collector.body(),
      bytes: this.collector.bytes,
    };
    try {
      commitHead(res, this.lengthRemoved ? undefined : this.collector.bytes);
    } catch (error) {
      this.headFailed(response.status);
      throw error;
    }
    // The answer of a timeout middleware (`connect-timeout` marks the request `timedout` and passes an
    // error on while the handler runs on): not the handler's outcome. Released as the 503 it is, a retry
    // ran the handler beside the first (a second charge); a marker is kept instead (`cutOff`), as for
    // Fastify's `handlerTimeout`, so that no retry runs it again.
    const outcome = timedOut(res)
      ? () => this.execution.cutOff(response.status)
      : () => this.execution.finish(response);
    // Express's final handler closes the connection after an error that follows the head: it waits for
    // the held bytes, which it would otherwise cut off (`./held-socket.ts`).
    const release = holdSocket(res.req.socket);
    void this.settle(response.status, outcome).then(() => {
      this.held = false;
      try {
        end.apply(res, args);
        const late = this.late;
        this.late = undefined;
        if (late !== undefined) for (const call of late) call();
      } finally {
        release();
      }
    });
  }
}

/**
 * The request was timed out by a timeout middleware that answers in the handler's place before this
 * response ended: `connect-timeout` (and the middlewares modelled on it) set `req.timedout`. With
 * connect-timeout's `respond: false` nothing answers for the handler: its own answer, however late, is what
 * is stored.
 */
function timedOut(res: Response): boolean {
  const req = res.req as
    | (Response['req'] & { timedout?: unknown; clearTimeout?: unknown })
    | undefined;
  if (req?.timedout !== true) return false;
  // connect-timeout told not to respond (it alone sets `req.clearTimeout`, and listens for `timeout` only
  // to answer): positively identified, as any other middleware setting `timedout` may answer from its own
  // timer without a listener on the request.
  const silentConnectTimeout =
    typeof req.clearTimeout === 'function' && req.listenerCount('timeout') === 0;
  return !silentConnectTimeout;
}

// Statuses whose responses have no body, hence no Content-Length of their own (RFC 9110 §8.6).
const bodyless = (status: number) => status < 200 || status === 204 || status === 304;

/**
 * Write the head of a response whose `end` is held, as `end` would have: with the Content-Length Node
 * adds for a body handed whole to `end` (`bytes`: nothing was written before, or the head would be out),
 * so that holding the `end` does not turn the response into a chunked one; none when the handler removed
 * it (`bytes` undefined), as Node adds none then. Through `res.writeHead`, so that wrappers of it
 * (on-headers: compression, response-time) see the head when it is written.
 */
function commitHead(res: Response, bytes: number | undefined): void {
  if (res.headersSent) return;
  // Not with a Trailer header: Node sends trailers only on a chunked response, and refuses (throws from
  // writeHead) a head that announces them beside a Content-Length.
  if (
    bytes !== undefined &&
    !bodyless(res.statusCode) &&
    res.req.method !== 'HEAD' &&
    !res.hasHeader('content-length') &&
    !res.hasHeader('transfer-encoding') &&
    !res.hasHeader('trailer')
  ) {
    res.setHeader('content-length', bytes);
  }
  res.writeHead(res.statusCode);
}

// Headers handed to writeHead bypass getHeaders() when no header was set before: move them into
// setHeader so that they can be captured. Returns writeHead's arguments without them. Once a header is set,
// Node merges them itself (each one replacing a header of that name, as setHeader does): they are left to
// it, since appending them here would send a header set earlier beside the one that replaces it (two
// Content-Type lines).
function moveHeaders(res: Response, args: unknown[]): unknown[] {
  if (res.getHeaderNames().length > 0) return args;
  const [status, a, b] = args;
  const message = typeof a === 'string' ? a : undefined;
  const headers = typeof a === 'string' ? b : a;
  if (Array.isArray(headers)) {
    const flat = headers.flat() as string[];
    for (let i = 0; i + 1 < flat.length; i += 2) res.appendHeader(flat[i]!, flat[i + 1]!);
  } else if (headers !== undefined && headers !== null) {
    for (const [k, v] of Object.entries(headers)) res.setHeader(k, v as string);
  }
  return message === undefined ? [status] : [status, message];
}

const captures = new WeakMap<object, Capture>();

/** The hooks installed on one prototype, to check that they are still in place. */
interface Hooks {
  writeHead: Method;
  write: Method;
  end: Method;
  removeHeader: Method;
  send: Method;
  json: Method;
  jsonp: Method;
}
const installed = new WeakMap<object, Hooks>();

// The methods that make a body of what the handler answers before they write it (`Capture.answer`).
const ANSWERS = ['send', 'json', 'jsonp'] as const;

// The hook of one of `ANSWERS` (`method`: the one it delegates to): through the capture on a captured
// response.
function answerHook(method: () => Method): Method {
  return function answer(this: Response, ...args: unknown[]) {
    const capture = captures.get(this);
    if (capture === undefined) return method().apply(this, args);
    return capture.answer(method(), args);
  };
}

// The method of `target` to delegate to: its own (an app may customise its response) or, looked up at each
// call, the one it inherits from Node.
function original(target: object, name: keyof Hooks): () => Method {
  if (Object.hasOwn(target, name)) {
    const own = (target as Record<string, unknown>)[name] as Method;
    return () => own;
  }
  const parent = Object.getPrototypeOf(target) as Record<string, Method>;
  return () => parent[name] as Method;
}

function install(target: object): Hooks {
  const writeHead = original(target, 'writeHead');
  const write = original(target, 'write');
  const end = original(target, 'end');
  const removeHeader = original(target, 'removeHeader');
  const hooks: Hooks = {
    writeHead(this: Response, ...args: unknown[]) {
      const capture = captures.get(this);
      if (capture === undefined) return writeHead().apply(this, args);
      // Node's own implicit call (`writeHead(statusCode)`) carries no headers: the common case.
      const result = writeHead().apply(
        this,
        args[1] === undefined ? args : moveHeaders(this, args),
      );
      capture.headWritten();
      return result;
    },
    write(this: Response, ...args: unknown[]) {
      const capture = captures.get(this);
      if (capture === undefined) return write().apply(this, args);
      return capture.write(write(), args);
    },
    end(this: Response, ...args: unknown[]) {
      const capture = captures.get(this);
      if (capture === undefined) return end().apply(this, args);
      return capture.end(end(), args);
    },
    removeHeader(this: Response, ...args: unknown[]) {
      captures.get(this)?.removed(args[0]);
      return removeHeader().apply(this, args);
    },
    send: answerHook(original(target, 'send')),
    json: answerHook(original(target, 'json')),
    jsonp: answerHook(original(target, 'jsonp')),
  };
  for (const name of ['writeHead', 'write', 'end', 'removeHeader', ...ANSWERS] as const) {
    Object.defineProperty(target, name, {
      value: hooks[name],
      writable: true,
      configurable: true,
      enumerable: false,
    });
  }
  installed.set(target, hooks);
  return hooks;
}

// True when the hooks can capture `res`: they are in its chain (installed now if needed, and not replaced
// since), and nothing wrapped its write/end before this middleware. A wrapper of writeHead is fine once
// headers are set, since Node then merges headers handed to writeHead into the ones getHeader reads.
function hooked(res: Response): boolean {
  const target = expressPrototype(res, ServerResponse.prototype);
  if (target === undefined) return false;
  const hooks = installed.get(target) ?? install(target);
  const methods = target as unknown as Hooks;
  if (methods.end !== hooks.end || methods.write !== hooks.write) return false;
  if (Object.hasOwn(res, 'write') || Object.hasOwn(res, 'end')) return false;
  const writeHeadHooked = methods.writeHead === hooks.writeHead && !Object.hasOwn(res, 'writeHead');
  return writeHeadHooked || res.getHeaderNames().length > 0;
}

/** Capture the response the handler writes on `res` and hand it to `execution`. */
export function captureResponse(res: Response, execution: Execution): void {
  const capture = new Capture(execution, res);
  // 'close' comes after the real `end`, which a captured response only calls once its outcome is stored,
  // or when the connection is gone.
  res.once('close', capture.onClose);
  if (hooked(res)) captures.set(res, capture);
  else patch(res, capture);
}

let warned = false;

// Once per process: the cause is in the application's wiring, and every request through it would repeat it.
function warnUncaptured(): void {
  if (warned) return;
  warned = true;
  process.emitWarning(
    'idempotency-kit: a response under the Express middleware was ended without passing through its capture ' +
      '(a sub-app of another copy of Express, or a direct call of http.ServerResponse.prototype.end). It was ' +
      'kept as a response_not_captured marker: retries with its key get 409 and are not run again. Mount the ' +
      'middleware in the app that sends the response.',
    { code: 'IDEMPOTENCY_KIT_UNCAPTURED' },
  );
}

// The fallback: patch this response's own methods (each one a property added to the response).
function patch(res: Response, capture: Capture): void {
  const writeHead = res.writeHead as unknown as Method;
  res.writeHead = function (this: Response, ...args: unknown[]) {
    const result = writeHead.apply(this, args[1] === undefined ? args : moveHeaders(this, args));
    capture.headWritten();
    return result;
  } as Response['writeHead'];
  const write = res.write as unknown as Method;
  const end = res.end as unknown as Method;
  const removeHeader = res.removeHeader;
  res.write = ((...args: unknown[]) => capture.write(write, args)) as Response['write'];
  res.end = ((...args: unknown[]) => capture.end(end, args)) as Response['end'];
  res.removeHeader = (name: string) => {
    capture.removed(name);
    removeHeader.call(res, name);
  };
  for (const name of ANSWERS) {
    // Absent from a response that does not inherit from Express's (a bare router's).
    const method = res[name] as unknown as Method | undefined;
    if (method === undefined) continue;
    (res as unknown as Record<string, Method>)[name] = (...args: unknown[]) =>
      capture.answer(method, args);
  }
}
