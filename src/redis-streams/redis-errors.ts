/**
 * The Redis errors the consumer tells apart by their message: a script Redis refused to run (the consumer
 * then falls back to plain commands), and a group gone (the consumer re-creates it).
 * @module
 */

/**
 * Whether `error` says Redis refused the dead-letter script before running any of it: Redis Cluster with
 * `stream` and `deadLetterStream` in different slots (`CROSSSLOT`; a shared hash tag avoids it), or a user
 * whose ACL denies `EVAL` (`NOPERM … 'eval'`), or a server or proxy without it (`unknown command`). Not an
 * error raised inside the script (an `XADD` to a key of another type): the script writes nothing before
 * that can fail, and such an error is the letter's failure, as an `XADD`'s would be.
 */
export function isScriptRefused(error: unknown): boolean {
  const message = String((error as Error | undefined)?.message);
  // Redis 7 quotes the command's name in single quotes, Redis 6.2 (and proxies copying it) in backticks.
  return (
    message.startsWith('CROSSSLOT') || /^NOPERM.*'eval'|unknown command [`']eval[`']/i.test(message)
  );
}

/**
 * Whether `error` says the group is gone: `NOGROUP` (the group destroyed, or the stream deleted), or, for a
 * read blocked when the stream was deleted, `UNBLOCKED the stream key no longer exists` (Redis 7).
 */
export function isGroupGone(error: unknown): boolean {
  const message = String((error as Error | undefined)?.message);
  return message.includes('NOGROUP') || message.startsWith('UNBLOCKED');
}
