/**
 * The entries the consumers of this process are handling live (a delivery of each still resets its idle
 * time), by stream and group, shared by every consumer instance (every `idempotentConsumer` call) on them:
 * what a claim round of any of them leaves to its delivery.
 *
 * Why one registry for the process: the event loop is one. Stalled past `minIdle` (synchronous work in a
 * handler), it delays the idle resets of every instance alike, and once it runs again any instance's claim
 * round may reach Redis before another's overdue reset. With a record per instance (held-entries.ts), two
 * instances on one stream and group took each other's live entries: measured on Redis, the second
 * instance's round took the first's entry, counted a delivery and retried it as in progress, again and
 * again while the first ran (a healthy entry counted 6), and a failing handler was dead-lettered after 2
 * real runs with `maxDeliveries: 3`.
 *
 * Counted per id, not a set: two deliveries of one entry may both reset it (one per instance), and the
 * entry stays live until both stopped. A stream and group's ids leave the registry with their last
 * delivery, so nothing stays of a consumer closed. Keyed by names only: an instance on another Redis server
 * with the same stream and group names may leave an entry of the same id unclaimed a while (ids are
 * times: a rare collision, its only effect a claim delayed until that delivery ends).
 * @module
 */

/** Per stream and group: how many live deliveries each entry id has in this process. */
const registry = new Map<string, Map<string, number>>();

/** The live entries of this process on one stream and group (see the module's comment). */
export class LiveEntries {
  private readonly key: string;

  constructor(stream: string, group: string) {
    // Unambiguous whatever the names hold (a stream `a:b` and group `c`, a stream `a` and group `b:c`).
    this.key = JSON.stringify([stream, group]);
  }

  /** A delivery of entry `id` started resetting its idle time. */
  add(id: string): void {
    let ids = registry.get(this.key);
    if (ids === undefined) {
      ids = new Map();
      registry.set(this.key, ids);
    }
    ids.set(id, (ids.get(id) ?? 0) + 1);
  }

  /** A delivery of entry `id` stopped resetting its idle time (it ended, or its lease was lost). */
  remove(id: string): void {
    const ids = registry.get(this.key);
    const count = ids?.get(id);
    if (ids === undefined || count === undefined) return;
    if (count > 1) ids.set(id, count - 1);
    else ids.delete(id);
    if (ids.size === 0) registry.delete(this.key);
  }

  /** The ids live now, of every instance: what a claim round must leave to their deliveries. */
  ids(): string[] {
    return [...(registry.get(this.key)?.keys() ?? [])];
  }

  /** Whether entry `id` is live now, in any instance. */
  has(id: string): boolean {
    return registry.get(this.key)?.has(id) ?? false;
  }
}
