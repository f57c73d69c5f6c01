/**
 * Where a consumer group stood when the consumer started: its last-delivered id (`XINFO GROUPS`), the
 * floor of where the group is re-created if it goes missing (`XGROUP DESTROY`) before this consumer has
 * read anything itself.
 *
 * Why: the group was re-created after the last entry this consumer read, but at `0` when it had read none
 * (a consumer started after the backlog was drained, whose reads its peers' had all answered): on a real
 * Redis 7, after `XGROUP DESTROY`, such a consumer re-created the group first and the whole stream was
 * delivered again, entries older than the store's `retention` running a second time. Every entry up to
 * the group's last-delivered id had been delivered already, to some consumer of the group.
 * @module
 */
import { command, type RedisStreamsClient, text } from './redis-client.js';

/** Field `name` of one group of an `XINFO GROUPS` reply: flat pairs (RESP2), a Map or an object (RESP3). */
function field(group: unknown, name: string): unknown {
  if (group instanceof Map) {
    for (const [key, value] of group) if (text(key) === name) return value;
    return undefined;
  }
  if (Array.isArray(group)) {
    for (let i = 0; i + 1 < group.length; i += 2) if (text(group[i]) === name) return group[i + 1];
    return undefined;
  }
  if (typeof group === 'object' && group !== null) {
    return (group as Record<string, unknown>)[name];
  }
  return undefined;
}

/**
 * The last-delivered id of `group` on `stream`, or undefined when it delivered nothing yet (`0-0`), or
 * cannot be read (`XINFO` refused by an ACL, a reply of another form): the caller then knows no more than
 * before. Never rejects.
 */
export async function lastDeliveredId(
  client: RedisStreamsClient,
  stream: string,
  group: string,
): Promise<string | undefined> {
  let reply: unknown;
  try {
    reply = await command(client, ['XINFO', 'GROUPS', stream]);
  } catch {
    return undefined;
  }
  if (!Array.isArray(reply)) return undefined;
  for (const item of reply) {
    if (text(field(item, 'name')) !== group) continue;
    const id = field(item, 'last-delivered-id');
    if (id === undefined || id === null) return undefined;
    const last = text(id);
    return /^\d+-\d+$/.test(last) && last !== '0-0' ? last : undefined;
  }
  return undefined;
}
