/**
 * How `idempotency-kit list --crashed` prints a page of crashed keys: each key explained exactly as
 * `inspect` explains it (`key-report.ts`), then how many there were and how to get the next page; or one
 * JSON object for scripts. Pure, so the wording is unit-tested without a store.
 * @module
 */
import type { CrashedKeysPage } from '../core/crashed-keys.js';
import { inspectionLines, reportJson } from './key-report.js';

/** The lines `list --crashed` prints for one page; `target` names what was read. */
export function crashedPageLines(target: string, page: CrashedKeysPage): string[] {
  const lines = [`${target}: crashed keys, each reserved for its own request`];
  for (const inspection of page.keys) lines.push('', ...inspectionLines(inspection));
  lines.push('', countLine(page));
  return lines;
}

/** How many keys the page held, and the option that reads the next page (when one may follow). */
function countLine(page: CrashedKeysPage): string {
  const count = page.keys.length;
  const keys = count === 0 ? 'no crashed keys' : `${count} crashed key${count === 1 ? '' : 's'}`;
  if (page.next === undefined) return count === 0 ? keys : `${keys}, no more`;
  return `${keys} on this page; next page: run again with --after ${page.next}`;
}

/** The JSON form of a page: the store, the target, each key as `inspect --json` shows it, and `next`. */
export function crashedPageJson(store: string, target: string, page: CrashedKeysPage): string {
  return reportJson({ store, target, keys: page.keys, next: page.next });
}
