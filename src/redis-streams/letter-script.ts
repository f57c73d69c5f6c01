/**
 * A dead letter and its entry's ack as one script (scripts/dead-letter-2.lua), written only while the entry
 * is pending in the group: no crash or failed command can fall between the two, the id leaves the pending
 * list only with its letter written, and a second write of the same letter writes nothing. Where the
 * script cannot run (Redis refuses it, or the letter has too many fields for it), the caller writes the
 * letter and acks in two commands.
 * @module
 */
import { loadScript } from '../redis/script-runner.js';
import type { StreamsContext } from './consumer-context.js';
import { letterBound } from './letter-add.js';
import type { CommandArgument } from './redis-client.js';
import { isScriptRefused } from './redis-errors.js';
import { deadLetter as deadLetterScript } from './scripts.gen.js';

// Its SHA1, computed once: each call is an EVALSHA (script-call.ts).
const DEAD_LETTER_SCRIPT = loadScript(deadLetterScript);

/**
 * Most letter fields (names and values) sent through the dead-letter script: Lua's `unpack` of its
 * arguments fails past ~8,000 values, so a letter of an entry with more fields goes as two commands.
 */
const MAX_SCRIPT_FIELDS = 7_000;

/**
 * Writes the letter `fields` of entry `id` and acks the entry as one script. Resolves to true when it
 * did, to false when the entry no longer was pending (its letter written, or the entry acked, by another
 * delivery or consumer), having done nothing, and to undefined, having done nothing, where the script
 * cannot run (refused, or too many fields).
 */
export type AtomicLetter = (id: string, fields: CommandArgument[]) => Promise<boolean | undefined>;

/** The {@link AtomicLetter} of the consumer of `context`. */
export function atomicLetter(context: StreamsContext): AtomicLetter {
  const { runScript } = context;
  const { stream, group, deadLetterStream } = context.options;
  // Whether a dead letter's XADD and its entry's XACK go as one script: until Redis refuses to run it
  // (isScriptRefused), then two commands, as before the script.
  let atomicLetters = true;
  // The dead-letter stream's bound (`deadLetterMaxLen`), as the script takes it: '' for none.
  const bound = letterBound(context.options);
  return async (id, fields) => {
    if (!atomicLetters || fields.length > MAX_SCRIPT_FIELDS) return undefined;
    try {
      const reply = await runScript(
        DEAD_LETTER_SCRIPT,
        [stream, deadLetterStream],
        [group, id, bound, ...fields],
      );
      // An integer reply: 0 from both clients (node-redis, ioredis) when the entry was not pending.
      return reply !== 0;
    } catch (error) {
      if (!isScriptRefused(error)) throw error;
      atomicLetters = false;
      return undefined;
    }
  };
}
