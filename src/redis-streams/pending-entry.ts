/**
 * Whether an entry id is still pending in its group: how the consumer, where Redis refuses its scripts,
 * tells an entry settled elsewhere (acked by another consumer, perhaps trimmed since) from one deleted while
 * pending, as the scripts do (`XPENDING` for the id, scripts/set-idle-1.lua and scripts/dead-letter-2.lua).
 *
 * Why: without the scripts, a retry's or idle reset's `XCLAIM` claims neither, and Redis 7's `XCLAIM` drops a
 * deleted id from the pending list: afterwards both look alike (not pending, no entry), and an entry another
 * consumer had settled and a trim then removed was reported `deleted` and dead-lettered though it had been
 * processed. So the id is looked up before anything that could drop it. Only an id no longer pending is
 * known settled (nothing makes it pending again); one pending may still be acked right after the answer.
 * @module
 */
import { command, type RedisStreamsClient } from './redis-client.js';

/** Whether `id` is pending in `group` of `stream` (one `XPENDING`); rejects when Redis does. */
export async function isPending(
  client: RedisStreamsClient,
  stream: string,
  group: string,
  id: string,
): Promise<boolean> {
  const reply = await command(client, ['XPENDING', stream, group, id, id, '1']);
  return Array.isArray(reply) && reply.length > 0;
}
