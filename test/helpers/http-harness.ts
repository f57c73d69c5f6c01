/**
 * Framework-neutral test routes for the HTTP conformance suite, the adapter harness contract, and raw
 * HTTP helpers (a socket-level client for header values Node's own client refuses to send).
 */
import { connect } from 'node:net';
import type { HttpRouteOptions, IdempotencyContext } from '../../src/http/index.js';
import type { Idempotency, Store } from '../../src/index.js';

/** What a test handler answers; each harness writes it the framework's native way. */
export type TestBody =
  | { kind: 'json'; value: unknown }
  | { kind: 'bytes'; value: Uint8Array; contentType: string }
  | { kind: 'empty' }
  | { kind: 'stream'; chunks: Uint8Array[]; contentType: string; delayMs?: number }
  /**
   * A body the handler writes as it produces it (an event stream, a generated answer): each chunk
   * `produce` yields is written as it comes (Express `res.write`, a Node stream for Fastify, a web stream
   * for fetch and Hono), then the end; an error thrown by `produce` cuts the response (Express
   * `res.destroy(error)`, the stream's error elsewhere).
   */
  | { kind: 'live'; contentType: string; produce(): AsyncIterable<Uint8Array> };

/** A test handler's reply. */
export interface TestReply {
  status: number;
  headers?: Record<string, string | string[]>;
  body: TestBody;
}

/** What a test handler sees. */
export interface TestRequest {
  /** The parsed body (JSON), raw bytes (octet-stream) or undefined. */
  body: unknown;
  header(name: string): string | undefined;
  /** `currentIdempotency()` as seen inside the handler. */
  context: IdempotencyContext | undefined;
  /**
   * Resolves once the response's connection has closed (Express, Fastify: the response's `close`, also
   * after a complete response; fetch, Hono: the request's signal, which the server aborts when the client
   * went away before the end).
   */
  gone(): Promise<void>;
}

/** One route of the test app. */
export interface TestRoute {
  method: 'POST' | 'PATCH' | 'PUT' | 'GET' | 'DELETE';
  path: string;
  options?: HttpRouteOptions;
  handle(request: TestRequest): Promise<TestReply>;
}

/** A running test server. */
export interface RunningServer {
  url: string;
  close(): Promise<void>;
}

/** How a conformance run starts one adapter. */
export interface HttpAdapterHarness {
  name: string;
  start(options: {
    engine: Idempotency;
    defaults: HttpRouteOptions;
    routes: TestRoute[];
  }): Promise<RunningServer>;
}

/** How a conformance run gets a store. */
export interface HttpStoreFactory {
  name: string;
  create(): Promise<Store> | Store;
  /** Called once after the suite (drop schemas, close clients). */
  cleanup?(): Promise<void>;
}

/** A store that counts claims, so tests can assert that nothing reached the store. */
export function countingStore(inner: Store): Store & { claims: number } {
  const counted = Object.create(inner) as Store & { claims: number };
  counted.claims = 0;
  counted.claim = (key, options) => {
    counted.claims++;
    return inner.claim(key, options);
  };
  // Stores that batch (`capabilities.batch`) receive claims through claimMany: count those too.
  const claimMany = inner.claimMany;
  if (claimMany !== undefined) {
    counted.claimMany = (requests) => {
      counted.claims += requests.length;
      return claimMany.call(inner, requests);
    };
  }
  return counted;
}

/** A parsed raw HTTP response. */
export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * Send a request over a plain socket, header lines written as given (latin1), so tests can send repeated,
 * empty, control-character or non-ASCII header values.
 */
export function rawRequest(
  url: string,
  method: string,
  path: string,
  headerLines: Array<[string, string]>,
  body = '',
): Promise<RawResponse> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    const chunks: Buffer[] = [];
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('end', () => {
      const raw = Buffer.concat(chunks);
      const split = raw.indexOf('\r\n\r\n');
      const head = raw.subarray(0, split).toString('latin1').split('\r\n');
      const status = Number(head[0]?.split(' ')[1]);
      const headers: Record<string, string> = {};
      for (const line of head.slice(1)) {
        const i = line.indexOf(':');
        headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
      }
      let payload: Buffer = raw.subarray(split + 4);
      if (headers['transfer-encoding'] === 'chunked') payload = dechunk(payload);
      resolve({ status, headers, body: payload });
    });
    const bodyBytes = Buffer.from(body, 'utf8');
    const lines = [
      `${method} ${path} HTTP/1.1`,
      `Host: ${hostname}:${port}`,
      'Connection: close',
      'Content-Type: application/json',
      `Content-Length: ${bodyBytes.byteLength}`,
      ...headerLines.map(([n, v]) => `${n}: ${v}`),
    ];
    socket.write(
      Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), bodyBytes]),
    );
  });
}

function dechunk(data: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  while (at < data.length) {
    const eol = data.indexOf('\r\n', at);
    const size = Number.parseInt(data.subarray(at, eol).toString('latin1'), 16);
    if (!size) break;
    out.push(data.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}

/** Parse a test request body from its content type. */
export function parseTestBody(contentType: string | undefined, bytes: Uint8Array): unknown {
  if (bytes.byteLength === 0) return undefined;
  if (contentType?.includes('json')) return JSON.parse(Buffer.from(bytes).toString('utf8'));
  return Buffer.from(bytes);
}

/** A promise with its resolver, for gating handlers. */
export function gate(): { promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}
