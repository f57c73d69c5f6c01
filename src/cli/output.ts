/**
 * The CLI's standard output and error, written so that a reader that goes away ends the output, not the
 * process: `idempotency-kit inspect … | head -5` closes the pipe after five lines, and the next write fails
 * with `EPIPE`. Node ignores SIGPIPE, so that failure arrives as an `'error'` event, which, unhandled,
 * crashed the CLI with a stack trace and exit 1. Shell tools stop writing quietly instead.
 * @module
 */
import type { EventEmitter } from 'node:events';

/** The part of `process.stdout` an {@link Output} uses (`isTTY`: set on a terminal's stream only). */
export type WritableLike = Pick<NodeJS.WritableStream, 'write'> &
  Pick<EventEmitter, 'on'> & { readonly isTTY?: boolean };

/** One of the CLI's streams. */
export interface Output {
  /** Write `text`; nothing once the stream has failed (its reader has gone). */
  write(text: string): void;
  /**
   * The error the stream failed with, unless its reader merely went away (`EPIPE`): a disk that is full
   * under a redirection, say, which the command must report rather than claim success.
   */
  readonly failure: Error | undefined;
  /** True when the stream is a terminal (someone is watching), not a file or a pipe. */
  readonly isTerminal: boolean;
}

// EPIPE: the reader closed the pipe. ERR_STREAM_DESTROYED: a write after that, in the same tick.
const READER_GONE = new Set(['EPIPE', 'ERR_STREAM_DESTROYED']);

/** Wrap `stream` (`process.stdout`, `process.stderr`) in an {@link Output}: call it once per stream. */
export function output(stream: WritableLike): Output {
  let closed = false;
  let failure: Error | undefined;
  stream.on('error', (error: NodeJS.ErrnoException) => {
    closed = true;
    if (!READER_GONE.has(error?.code ?? '')) failure ??= error;
  });
  return {
    write(text) {
      if (!closed) stream.write(text);
    },
    get failure() {
      return failure;
    },
    isTerminal: stream.isTTY === true,
  };
}
