/**
 * The Redis store's startup check: warn once when a master's `maxmemory-policy` is not `noeviction`
 * (eviction of a claim or an outcome means a duplicate execution).
 * @module
 */
import type { RedisCommander } from './client.js';
import type { Guard } from './guard.js';
import { replyText } from './replies.js';

/** A warning the store reports through `RedisStoreOptions.onWarning`. */
export interface RedisStoreWarning {
  /** Stable code: `eviction_policy` when `maxmemory-policy` is not `noeviction`. */
  code: 'eviction_policy';
  /** Human-readable explanation and fix. */
  message: string;
  /** The policy the server reported. */
  policy: string;
}

function configValue(reply: unknown): string | undefined {
  // RESP2: [name, value]; RESP3: a map (an object or a Map depending on the client's type mapping).
  if (Array.isArray(reply)) return reply[1] === undefined ? undefined : replyText(reply[1]);
  if (reply instanceof Map) {
    const [value] = reply.values();
    return value === undefined ? undefined : replyText(value);
  }
  if (typeof reply === 'object' && reply !== null) {
    const [value] = Object.values(reply);
    return value === undefined ? undefined : replyText(value);
  }
  return undefined;
}

/** Read `maxmemory-policy` on every master; report the first one that is not `noeviction`. Never rejects. */
export async function checkEvictionPolicy(
  commander: RedisCommander,
  guard: Guard,
  onWarning: (warning: RedisStoreWarning) => void,
): Promise<void> {
  try {
    const nodes = await guard('startup check', () => commander.masters());
    for (const node of nodes) {
      const reply = await guard('startup check', () =>
        node.send(undefined, ['CONFIG', 'GET', 'maxmemory-policy']),
      );
      const policy = configValue(reply);
      if (policy !== undefined && policy !== 'noeviction') {
        onWarning({
          code: 'eviction_policy',
          policy,
          message:
            `idempotency-kit: Redis maxmemory-policy is '${policy}', not 'noeviction': under memory ` +
            'pressure Redis may evict in-flight claims or stored outcomes, and a duplicate execution ' +
            'follows. Use a dedicated instance (or database) with maxmemory-policy noeviction.',
        });
        return;
      }
    }
  } catch {
    // CONFIG is often disabled on managed Redis; the check is advice, never a reason to fail.
  }
}
