/**
 * Runs the store's Lua scripts: `EVALSHA` with the SHA1 computed once per script, and a transparent `EVAL`
 * when the server answers `NOSCRIPT` (its script cache is empty after a restart, a failover or
 * `SCRIPT FLUSH`). The `EVAL` also puts the script back in the cache, so the next call is an `EVALSHA` again.
 * @module
 */
import { createHash } from 'node:crypto';
import type { RedisArg, RedisCommander } from './client.js';

/** A script as `npm run gen` inlines it: source and number of KEYS. */
export interface ScriptSource {
  /** The Lua source. */
  readonly source: string;
  /** How many of the arguments are keys; `null` for a variadic script (`<name>-n.lua`, one key per item). */
  readonly numberOfKeys: number | null;
}

/** A script ready to run: its source and its SHA1, computed once. */
export interface LoadedScript extends ScriptSource {
  /** SHA1 hex digest of the source, as Redis names cached scripts. */
  readonly sha: string;
}

/** Compute a script's SHA1 once, at load. */
export function loadScript(script: ScriptSource): LoadedScript {
  return { ...script, sha: createHash('sha1').update(script.source).digest('hex') };
}

/** True for Redis's `NOSCRIPT` error (both libraries keep the server's message as is). */
export function isNoScriptError(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * The command of a script call, `EVALSHA <sha> <numkeys>`, for the caller to append its keys and then its
 * arguments to, and to send with {@link sendScript}. Built in place, one array per call: a batch of a
 * hundred items is some three hundred arguments, and every copy of them costs client CPU.
 */
export function scriptCommand(script: LoadedScript, numberOfKeys: number): RedisArg[] {
  return ['EVALSHA', script.sha, String(numberOfKeys)];
}

/**
 * Send a command built by {@link scriptCommand} in one round trip (two only right after the server lost its
 * script cache). Resending after `NOSCRIPT` is safe: the script did not run. Not an async function: on the
 * hot path every extra promise layer costs client CPU.
 */
export function sendScript(
  commander: RedisCommander,
  script: LoadedScript,
  command: ReadonlyArray<RedisArg>,
): Promise<unknown> {
  // The first key routes the call to its Cluster node; a script call always has one.
  const key = command[3] as string | undefined;
  return commander.send(key, command).catch((error: unknown) => {
    if (!isNoScriptError(error)) throw error;
    return commander.send(key, asEval(script, command));
  });
}

/**
 * `command` (an `EVALSHA` built by {@link scriptCommand}) as the `EVAL` of the script's source, to send
 * again after `NOSCRIPT`: the server lost its script cache, and the script did not run.
 */
export function asEval(script: LoadedScript, command: ReadonlyArray<RedisArg>): RedisArg[] {
  const again = command.slice();
  again[0] = 'EVAL';
  again[1] = script.source;
  return again;
}

/** {@link scriptCommand} with `keys` and `args` pushed: the whole call of `script`. */
export function scriptCall(
  script: LoadedScript,
  keys: ReadonlyArray<string>,
  args: ReadonlyArray<RedisArg>,
): RedisArg[] {
  const command = scriptCommand(script, keys.length);
  for (const key of keys) command.push(key);
  for (const arg of args) command.push(arg);
  return command;
}

/** Run `script` with its keys and arguments: {@link scriptCommand} and {@link sendScript} in one. */
export function runScript(
  commander: RedisCommander,
  script: LoadedScript,
  keys: ReadonlyArray<string>,
  args: ReadonlyArray<RedisArg>,
): Promise<unknown> {
  return sendScript(commander, script, scriptCall(script, keys, args));
}
