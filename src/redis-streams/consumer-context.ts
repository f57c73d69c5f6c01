/**
 * What the consumer's parts (idle times, claim rounds, dead letters, deleted entries) share: its client,
 * its resolved options, and how it reports, acks and runs scripts.
 * @module
 */
import type { ReportError } from './consumer-errors.js';
import type { ResolvedStreamsOptions } from './consumer-options.js';
import type { RedisStreamsClient } from './redis-client.js';
import type { ScriptCall } from './script-call.js';

/** One consumer's shared parts. */
export interface StreamsContext {
  /** The connection every command but the blocking read goes through. */
  client: RedisStreamsClient;
  /** The consumer's options, resolved. */
  options: ResolvedStreamsOptions;
  /** Runs a script over `client` (script-call.ts). */
  runScript: ScriptCall;
  /** Reports a failure of the consumer as a whole (consumer-errors.ts). */
  reportError: ReportError;
  /** Acks one entry, with the others of its burst (acks.ts). */
  ack(id: string): Promise<void>;
}
