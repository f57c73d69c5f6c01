/**
 * A stream payload relayed by the plugin (`../http/stream-relay.ts`): handed to Fastify in place of the
 * handler's stream, so that each chunk goes out as the handler produces it and only the end waits for the
 * outcome to be stored.
 *
 * Always a Node `Readable`, also for a web `ReadableStream` payload: Fastify pipes a Node stream into the
 * response and destroys it when the client goes away (the relay's cue to read the rest itself), and for a
 * bodiless status (204, 1xx) it `resume()`s a Node stream to its end, whereas it would leave a web stream
 * unread, and the outcome would never be stored.
 *
 * A relay that is not what went out (a later `onSend` hook returned another payload for it) is never read
 * by the server: once the response has finished or its connection closed, it is abandoned as for a client
 * that left, so that the relay reads the handler's stream itself and stores it. Left alone, its key would
 * stay in progress, its lease extended, until `maxExecution`.
 * @module
 */
import { finished, Readable } from 'node:stream';
import type { BodyRelay, ChunkSource } from '../http/stream-relay.js';

/** The handler's Node stream as a relay's source. */
export function nodeStreamSource(stream: AsyncIterable<Uint8Array | string>): ChunkSource {
  const iterator = stream[Symbol.asyncIterator]();
  return {
    read: () => iterator.next(),
    // As Fastify stops a stream payload whose client went away: destroyed without an error.
    stop: () => {
      const destroy = (stream as { destroy?: () => void }).destroy;
      if (typeof destroy === 'function') destroy.call(stream);
      else void iterator.return?.();
    },
  };
}

/**
 * The relay as the Node stream Fastify sends for `response` (`reply.raw`), abandoned if the response ends
 * without having read it to its end.
 */
export function relayedBody(relay: BodyRelay, response: NodeJS.WritableStream): RelayedBody {
  const body = new RelayedBody(relay);
  // Also for a response closed already (the client left while the handler ran). Sent, the body has ended
  // before the response finishes (its end is what ends the response) and this does nothing; cut, Fastify
  // has destroyed it already. Otherwise it was thrown away unread, or is still being drained by Fastify
  // (`resume()` for a bodiless status): destroyed, it is read by the relay alone, never by two readers.
  finished(response, () => {
    if (!body.readableEnded) body.destroy();
  });
  return body;
}

/** The relay as the Node stream Fastify sends. */
export class RelayedBody extends Readable {
  constructor(private readonly relay: BodyRelay) {
    super();
  }

  override _read(): void {
    this.relay.next().then(
      (chunk) => {
        if (!this.destroyed) this.push(chunk);
      },
      // The handler's stream failed (the key is released): Fastify answers the error if the head has not
      // gone out yet, else cuts the response.
      (error: Error) => this.destroy(error),
    );
  }

  // Destroyed without an error before its end: the client went away (Fastify destroys the payload then).
  // After the end (autoDestroy) or a failure, the relay is over and this does nothing.
  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (error === null) this.relay.abandon(undefined);
    callback(error);
  }
}
