/**
 * Where an entry a process holds stands in its group, asked where Redis refuses the consumer's scripts:
 * still pending, or, no longer pending, settled elsewhere (its entry still in the stream) or deleted while
 * held (its entry gone), as the scripts tell (`XPENDING` for the id, `XRANGE` for the entry,
 * scripts/set-idle-1.lua and scripts/dead-letter-2.lua). The dead letter asks both (dead-letters.ts); a
 * reset of idle times, whose `XCLAIM` claims only pending ids, asks only the second (idle-times.ts).
 *
 * Why both looks: without the scripts, an entry another consumer acked is no longer pending, but so is one
 * deleted while this process held it whose id another process's claim round dropped (Redis 7's
 * `XAUTOCLAIM` drops a deleted id whatever its idle time, and records it without the fields it never
 * read). Taken for settled elsewhere, the holder recorded nothing when its handler failed: the entry's
 * payload was lost for good. So an id no longer pending is settled elsewhere only while its entry is still
 * in the stream; gone, the holder records it with its fields. An entry acked elsewhere AND trimmed while
 * held then gets a letter it did not need (see the docs): a redundant letter can be cleaned up, a lost
 * payload cannot be replayed.
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

/**
 * Whether entry `id` is gone from `stream` (one `XRANGE` that finds nothing); a reply of another form is
 * not taken for gone. Rejects when Redis does.
 */
export async function isEntryGone(
  client: RedisStreamsClient,
  stream: string,
  id: string,
): Promise<boolean> {
  const reply = await command(client, ['XRANGE', stream, id, id]);
  return Array.isArray(reply) && reply.length === 0;
}
