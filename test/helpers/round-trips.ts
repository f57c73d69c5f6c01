/**
 * Counters of the requests a store sends through the client it is given, for the conformance suite's
 * `roundTrips` option: one per Redis command (ioredis `callBuffer`, node-redis `sendCommand`, the two
 * methods the Redis store sends through) or per PostgreSQL statement (`query`). They wrap the client, not
 * the store, so they count what reaches the server whatever the store does inside.
 */
import type { PgQueryable } from '../../src/postgres/index.js';
import type { RedisClientLike } from '../../src/redis/index.js';

/** A counter, and the clients it counts for. */
export interface RoundTripCounter {
  /** Requests sent so far through every client this counter wrapped. */
  count(): number;
  /** `client`, counting each command it sends. */
  redis<C extends RedisClientLike>(client: C): C;
  /** `pool`, counting each statement it runs. */
  postgres(pool: PgQueryable): PgQueryable;
}

/** A new counter at 0. */
export function roundTripCounter(): RoundTripCounter {
  let sent = 0;
  /**
   * `target`, counting each call of its methods named in `senders`. A proxy, not a copy: the store sees
   * the client as it is (node-postgres's pool is told apart by its fields, and gets prepared statements),
   * and the client's own methods run on the client itself (node-redis keeps private `#` fields).
   */
  function counted<T extends object>(target: T, senders: readonly string[]): T {
    return new Proxy(target, {
      get(object, property) {
        const value = Reflect.get(object, property, object) as unknown;
        if (typeof value !== 'function') return value;
        const method = value as (...args: unknown[]) => unknown;
        if (typeof property === 'string' && senders.includes(property)) {
          return (...args: unknown[]) => {
            sent++;
            return method.apply(object, args);
          };
        }
        return method.bind(object);
      },
    });
  }
  return {
    count: () => sent,
    redis: (client) => counted(client, ['callBuffer', 'sendCommand']),
    postgres: (pool) => counted(pool, ['query']),
  };
}
