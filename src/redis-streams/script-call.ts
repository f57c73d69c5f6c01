/**
 * How the consumer runs its Lua scripts (scripts/*.lua): `EVALSHA` with the SHA1 computed once, and the
 * script's `EVAL` only when the server answers `NOSCRIPT` (its script cache is empty after a restart, a
 * failover or `SCRIPT FLUSH`; that `EVAL` caches it again) or refuses `EVALSHA` itself.
 *
 * Why: every call sent the script's whole source with `EVAL` (1 to 3 KB: the dead letter of every message
 * given up on, every retry's idle reset, every claim round), which the client wrote and Redis read and
 * hashed again each time. A server that refuses scripts refuses both commands: the `EVAL` sent then gets
 * the refusal the consumer has always looked for (`NOPERM … 'eval'`, `unknown command 'eval'`,
 * `CROSSSLOT`), so its fallback to plain commands is unchanged.
 * @module
 */
import { isNoScriptError, type LoadedScript } from '../redis/script-runner.js';
import { type CommandArgument, command, type RedisStreamsClient } from './redis-client.js';

/** Runs `script` (its SHA1 computed once: `loadScript`) with `keys` and `args`; with `asBuffers`, bulk strings come back as Buffers. */
export type ScriptCall = (
  script: LoadedScript,
  keys: readonly string[],
  args: readonly CommandArgument[],
  asBuffers?: boolean,
) => Promise<unknown>;

/**
 * Whether `error` refuses `EVALSHA` itself (an ACL denying it, a proxy without it): the script may then
 * still run through `EVAL`, which says for itself whether it is refused too.
 */
function isEvalShaRefused(error: unknown): boolean {
  const message = String((error as Error | undefined)?.message);
  return /^NOPERM.*'evalsha'|unknown command [`']evalsha[`']/i.test(message);
}

/**
 * A {@link ScriptCall} over `client`. After an `EVALSHA` refused as a command, every later call of this
 * runner goes straight to `EVAL`: one round trip each, not two.
 */
export function scriptCaller(client: RedisStreamsClient): ScriptCall {
  let evalOnly = false;
  return (script, keys, args, asBuffers = false) => {
    const call: CommandArgument[] = ['EVALSHA', script.sha, String(keys.length), ...keys, ...args];
    const asEval = () => {
      // Resent as a whole: the script did not run (NOSCRIPT, or the command refused before running).
      call[0] = 'EVAL';
      call[1] = script.source;
      return command(client, call, asBuffers);
    };
    if (evalOnly) return asEval();
    return command(client, call, asBuffers).catch((error: unknown) => {
      if (isNoScriptError(error)) return asEval();
      if (!isEvalShaRefused(error)) throw error;
      evalOnly = true;
      return asEval();
    });
  };
}
