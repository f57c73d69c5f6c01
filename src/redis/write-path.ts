/**
 * The one path every write call of the Redis store takes: send the script call, then decode its reply.
 * With `waitForReplicas`, the call is followed by its `WAIT` (`replica-wait.ts`), and a call that fell
 * short is handed to its kind's handler (`replica-shortfalls.ts`) instead of being decoded as usual.
 * @module
 */
import type { RedisArg, RedisCommander } from './client.js';
import type { Guard } from './guard.js';
import type { OnShort } from './replica-shortfalls.js';
import { type Acknowledged, fellShort, type ReplicaWait, ReplicaWaiter } from './replica-wait.js';
import { type LoadedScript, sendScript } from './script-runner.js';

/**
 * Send a script call that writes (its `command` built by `scriptCommand`) and decode its reply; `onShort`
 * is what to answer when its `WAIT` fell short (absent: the answer stands whatever the count).
 */
export type Write = <T>(
  operation: string,
  script: LoadedScript,
  command: RedisArg[],
  decode: (reply: unknown) => T,
  onShort: OnShort<T> | undefined,
) => Promise<T>;

/**
 * The write path of a store: chosen once per store, so that it pays no test and no allocation of its own
 * per call. Without `waitForReplicas` (`replicas` undefined), the call as is. With it, the call followed
 * by its `WAIT` (see {@link ReplicaWaiter}): the reply decoded as usual when enough replicas acknowledged
 * it, else handed to `onShort` (`replica-shortfalls.ts`; absent: the answer stands whatever the count).
 */
export function writePath(
  commander: RedisCommander,
  guard: Guard,
  replicas: ReplicaWait | undefined,
): Write {
  const waiter = replicas === undefined ? undefined : new ReplicaWaiter(commander, replicas);
  return waiter === undefined
    ? (operation, script, command, decode) =>
        guard(operation, () => sendScript(commander, script, command), decode)
    : (operation, script, command, decode, onShort) =>
        guard(
          operation,
          () => waiter.sendScript(script, command),
          (acknowledged: Acknowledged) =>
            onShort !== undefined && fellShort(acknowledged, waiter.wait)
              ? onShort(acknowledged, decode, command)
              : decode(acknowledged.reply),
        );
}
