/**
 * The Redis Streams consumer as a consumer of another process would run it, for tests that stand a second
 * process in by a second consumer in this one: loaded afresh (a module instance of its own), it shares no
 * module state with the consumers the test imported, in particular not the entries they are handling
 * (src/redis-streams/live-entries.ts), which a consumer's claim rounds leave to the consumers of its own
 * process only.
 */
import { vi } from 'vitest';
import type { idempotentConsumer } from '../../src/redis-streams/index.js';

/** `idempotentConsumer` from a module instance of its own (see the module's comment). */
export async function otherProcessConsumer(): Promise<typeof idempotentConsumer> {
  vi.resetModules();
  return (await import('../../src/redis-streams/index.js')).idempotentConsumer;
}
