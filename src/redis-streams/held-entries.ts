/**
 * The entries this process is handling, by id, each with what its deliveries know of it ({@link HeldEntry}),
 * held for as long as any delivery of it runs here.
 *
 * Why counted: a claim round of this process may take an entry it still handles, whose idle time passed
 * `minIdle` while held (idle resets that reached Redis late: an event loop stalled longer than that; a
 * store claim slower than that did so too, before consumer/claim-phase.ts reset it), and start a second
 * delivery of it, which meets the key in progress and retries. With one record per id, that delivery replaced the
 * first one's and, ending first, removed it: the entry was no longer known as held. Deleted from the stream then, it was taken by a claim round for abandoned and
 * recorded without its fields, though the first delivery still held them; that delivery's letter then
 * found the id acked and was reported as a duplicate: the payload was lost. Shared by the deliveries of one
 * entry, the record says what is true of the entry in this process (deleted while held, dropped from the
 * pending list), whichever delivery found it.
 * @module
 */
import type { HeldEntry } from './idle-times.js';

/** A held entry's record and how many of its deliveries run. */
interface Holding {
  held: HeldEntry;
  deliveries: number;
}

/** The entries this process is handling (see the module's comment). */
export class HeldEntries {
  private readonly entries = new Map<string, Holding>();

  /** A delivery of entry `id` starts: the record it shares with the other deliveries of `id` running here. */
  hold(id: string): HeldEntry {
    const holding = this.entries.get(id);
    if (holding !== undefined) {
      holding.deliveries++;
      return holding.held;
    }
    const held: HeldEntry = { deleted: false, dropped: false };
    this.entries.set(id, { held, deliveries: 1 });
    return held;
  }

  /** A delivery of entry `id` ended: the entry is no longer held once none runs. */
  release(id: string): void {
    const holding = this.entries.get(id);
    if (holding === undefined) return;
    holding.deliveries--;
    if (holding.deliveries <= 0) this.entries.delete(id);
  }

  /** Entry `id`'s record while a delivery of it runs here, else undefined. */
  get(id: string): HeldEntry | undefined {
    return this.entries.get(id)?.held;
  }
}
