/**
 * The entries this consumer instance is handling, by id, each with what its deliveries know of it
 * ({@link HeldEntry}), held for as long as any delivery of it runs here.
 *
 * Why counted: a claim round of this process may take an entry it still handles, whose idle time passed
 * `minIdle` while held (idle resets that reached Redis late: an event loop stalled longer than that; a
 * store claim slower than that did so too, before consumer/claim-phase.ts reset it), and start a second
 * delivery of it, which meets the key in progress and retries. With one record per id, that delivery replaced the
 * first one's and, ending first, removed it: the entry was no longer known as held. Deleted from the stream then, it was taken by a claim round for abandoned and
 * recorded without its fields, though the first delivery still held them; that delivery's letter then
 * found the id acked and was reported as a duplicate: the payload was lost. Shared by the deliveries of one
 * entry, the record says what is true of the entry in this process (deleted while held, dropped from the
 * pending list), whichever delivery found it. Since, a claim round leaves the held entries out
 * ({@link HeldEntries.liveIds}; a held entry `XAUTOCLAIM` returns is not started) while their
 * deliveries still reset their idle time: one delivery of an entry at
 * a time here, the count kept as a safeguard. Those live entries are the process's, every consumer
 * instance's on the stream and group (live-entries.ts): the records stay one instance's, each of its
 * own deliveries.
 * @module
 */
import type { HeldEntry } from './idle-times.js';
import type { LiveEntries } from './live-entries.js';

/** A held entry's record, how many of its deliveries run, and how many of those still reset its idle time. */
interface Holding {
  held: HeldEntry;
  deliveries: number;
  live: number;
}

/** The entries this process is handling (see the module's comment). */
export class HeldEntries {
  private readonly entries = new Map<string, Holding>();

  /**
   * @param live - The live entries of the process on this consumer's stream and group, which this
   *   consumer's deliveries join and leave, and its claim rounds read.
   */
  constructor(private readonly live: LiveEntries) {}

  /** A delivery of entry `id` starts: the record it shares with the other deliveries of `id` running here. */
  hold(id: string): HeldEntry {
    const holding = this.entries.get(id);
    this.live.add(id);
    if (holding !== undefined) {
      holding.deliveries++;
      holding.live++;
      return holding.held;
    }
    const held: HeldEntry = { deleted: false, dropped: false };
    this.entries.set(id, { held, deliveries: 1, live: 1 });
    return held;
  }

  /**
   * A delivery of entry `id` stopped resetting its idle time for good while it runs on (its lease lost: a
   * hung handler past `maxExecution`): this process's claim rounds may take the entry again once idle, as
   * a crashed consumer's, unless another delivery of it still resets it. Call it once per delivery.
   */
  expire(id: string): void {
    const holding = this.entries.get(id);
    if (holding === undefined) return;
    holding.live--;
    this.live.remove(id);
  }

  /**
   * A delivery of entry `id` ended (`expired`: after {@link expire}): the entry is no longer held once none
   * runs.
   */
  release(id: string, expired = false): void {
    const holding = this.entries.get(id);
    if (holding === undefined) return;
    holding.deliveries--;
    if (!expired) {
      holding.live--;
      this.live.remove(id);
    }
    if (holding.deliveries <= 0) this.entries.delete(id);
  }

  /**
   * The ids of the entries held now by a delivery that still resets their idle time, in any consumer
   * instance of the process on the stream and group: what this process's claim rounds must leave to their
   * deliveries.
   */
  liveIds(): string[] {
    return this.live.ids();
  }

  /**
   * Whether entry `id` is held by a delivery that still resets its idle time, in any consumer instance of
   * the process on the stream and group (see {@link liveIds}).
   */
  isLive(id: string): boolean {
    return this.live.has(id);
  }

  /** Entry `id`'s record while a delivery of it runs here, else undefined. */
  get(id: string): HeldEntry | undefined {
    return this.entries.get(id)?.held;
  }
}
