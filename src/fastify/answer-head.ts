/**
 * The head (status and headers) the handler's answer was stored with, put back before it goes out.
 * Fastify writes the head only once every `onSend` hook is done, and the plugin's capture awaits the
 * store meanwhile: what the handler ran after `reply.send` (`reply.code(202)`, or
 * `reply.header('content-type', 'text/plain')` before a second send, which `./handler-answer.ts` drops)
 * would have changed the head, where without the plugin the reply had ended. The client got a JSON body
 * labelled `text/plain`, and its retry the replay with the head that was stored.
 * @module
 */
import type { FastifyReply } from 'fastify';

/** A reply's status and every header it has, as the capture stored them. */
export interface AnswerHead {
  status: number;
  headers: Record<string, unknown>;
}

// A header's value, copied: Fastify pushes a later `Set-Cookie` into the array it holds.
const copyOf = (value: unknown): unknown => (Array.isArray(value) ? [...value] : value);

const sameValue = (a: unknown, b: unknown): boolean =>
  Array.isArray(a) && Array.isArray(b)
    ? a.length === b.length && a.every((item, i) => item === b[i])
    : a === b;

/** The reply's head now (its headers copied). */
export function headOf(reply: FastifyReply): AnswerHead {
  const headers: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) headers[name] = copyOf(value);
  return { status: reply.statusCode, headers };
}

/** Put `head` back on the reply: its status, its headers, and none added since. */
export function restoreHead(reply: FastifyReply, head: AnswerHead): void {
  if (reply.statusCode !== head.status) reply.code(head.status);
  const now = reply.getHeaders();
  for (const name of Object.keys(now)) {
    if (!Object.hasOwn(head.headers, name)) reply.removeHeader(name);
  }
  for (const [name, value] of Object.entries(head.headers)) {
    if (sameValue(now[name], value)) continue;
    // Removed first: `reply.header` adds a `Set-Cookie` to those already there.
    reply.removeHeader(name);
    reply.header(name, copyOf(value));
  }
}
