/**
 * Test publishers for the outbox: a recorder that counts deliveries per message id (optionally slow, or
 * failing a given number of times first), and a wait-until helper.
 * @module
 */
import type { OutboxMessage } from '../../src/outbox/index.js';

/** A publisher that records every confirmed publish. */
export interface RecordingPublisher {
  publish(message: OutboxMessage): Promise<void>;
  /** Confirmed publishes, in order. */
  readonly messages: OutboxMessage[];
  /** Confirmed publishes per message id. */
  readonly counts: Map<string, number>;
  /** Publish calls per message id, failed ones included. */
  readonly calls: Map<string, number>;
  /** Publishes started and not finished. */
  inFlight: number;
}

/** Options of {@link recordingPublisher}. */
export interface RecorderOptions {
  /** Delay before each publish confirms (ms). */
  delayMs?: number;
  /** Fail the first `n` calls for each message id. */
  failTimes?: number;
}

/** Create a recording publisher. */
export function recordingPublisher(options: RecorderOptions = {}): RecordingPublisher {
  const recorder: RecordingPublisher = {
    messages: [],
    counts: new Map(),
    calls: new Map(),
    inFlight: 0,
    async publish(message) {
      const call = (recorder.calls.get(message.id) ?? 0) + 1;
      recorder.calls.set(message.id, call);
      recorder.inFlight++;
      try {
        if (options.delayMs) await new Promise((resolve) => setTimeout(resolve, options.delayMs));
        if (call <= (options.failTimes ?? 0)) throw new Error(`broker down (call ${call})`);
        recorder.messages.push(message);
        recorder.counts.set(message.id, (recorder.counts.get(message.id) ?? 0) + 1);
      } finally {
        recorder.inFlight--;
      }
    },
  };
  return recorder;
}

/** Poll `condition` until it holds, or throw after `timeoutMs` with `what` in the message. */
export async function waitFor(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
