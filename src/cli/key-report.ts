/**
 * How `idempotency-kit inspect` and `stats` print what they read (`list` reuses it, in
 * `crashed-report.ts`): text that says what the next request with the key meets (the question an operator
 * has when a client reports a 409 or a 422), or one JSON object for scripts. Pure, so the wording is
 * unit-tested without a database.
 * @module
 */
import { type KeyInspection, KeyState } from '../core/inspection.js';
import { decodeOutcome } from '../core/outcome.js';
import { type IdempotencyRecord, RecordStatus } from '../core/record.js';
import type { StoreStats } from '../store/store.js';

/** `ms` as a short span: `850 ms`, `12 s`, `5 min`, `3 h 20 min`, `2 d 4 h`. */
export function span(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(abs)} ms`;
  const seconds = Math.floor(abs / 1000);
  if (seconds < 120) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 120) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours} h ${minutes % 60} min`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

/** An instant of the store's clock, with how far it is from the clock's `now`. */
function when(at: number, now: number): string {
  const iso = new Date(at).toISOString();
  return at >= now ? `${iso} (in ${span(at - now)})` : `${iso} (${span(now - at)} ago)`;
}

function outcomeLine(outcome: Uint8Array): string {
  try {
    const decoded = decodeOutcome(outcome);
    if (decoded.kind === 'error') {
      const { name, message } = decoded.error as { name?: string; message?: string };
      return `a stored error (${name ?? 'Error'}: ${message ?? ''}), replayed to every retry`;
    }
    return `${decoded.payload.byteLength} bytes`;
  } catch {
    return `${outcome.byteLength} bytes (not in this version's envelope)`;
  }
}

/** The lines `inspect` prints for one key. */
export function inspectionLines(inspection: KeyInspection): string[] {
  const { storageKey, state, record, now } = inspection;
  if (state === KeyState.Absent || record === undefined) {
    const hidden =
      inspection.source === 'get'
        ? ' (this store cannot show a crashed request that still reserves the key)'
        : '';
    return [`${storageKey}: absent — no record; the next request with this key runs${hidden}`];
  }
  const lines = [`${storageKey}: ${state}`];
  if (record.status === RecordStatus.Completed) {
    lines.push(
      `  completed    ${when(record.completedAt, now)}`,
      `  kept until   ${when(record.expiresAt, now)}`,
      '  next request the same request gets the stored outcome replayed (HTTP: Idempotent-Replayed: true);',
      '               another request with this key gets a mismatch (HTTP 422 key_mismatch)',
      `  outcome      ${outcomeLine(record.outcome)}`,
    );
  } else if (state === KeyState.InProgress) {
    lines.push(
      `  lease until  ${when(record.leaseUntil, now)}, extended while its holder runs`,
      `  next request a duplicate waits: HTTP 409 with Retry-After ${Math.ceil((record.leaseUntil - now) / 1000)} s, consumers redeliver later;`,
      '               if the holder dies, the same request takes the key over once the lease ends',
    );
  } else {
    lines.push(
      `  lease ended  ${when(record.leaseUntil, now)} with no completion: its holder died or hung`,
      `  reserved     for its own request until ${when(record.reservedUntil ?? now, now)}`,
      `  next request the same request takes the key over (attempt ${record.attempt + 1}), resuming after its recorded steps;`,
      '               another request with this key gets a mismatch (HTTP 422 key_mismatch) until then',
    );
  }
  lines.push(...recordLines(record));
  return lines;
}

function recordLines(record: IdempotencyRecord): string[] {
  const lines = [`  fingerprint  ${record.fingerprint}`, `  token        ${record.token}`];
  if (record.status === RecordStatus.InProgress) {
    lines.push(
      `  attempt      ${record.attempt}`,
      `  created      ${new Date(record.createdAt).toISOString()}`,
    );
    const steps = Object.entries(record.steps ?? {});
    lines.push(
      steps.length === 0
        ? '  steps        none recorded'
        : `  steps        ${steps.map(([name, value]) => `${name} (${value.byteLength} bytes)`).join(', ')}`,
    );
  }
  return lines;
}

/** Bytes as base64, everything else as is: the JSON form of an inspection. */
export function inspectionJson(inspection: KeyInspection): string {
  return reportJson(inspection);
}

/** `value` as one line of JSON, its bytes (outcomes, steps) as base64. */
export function reportJson(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) =>
    item instanceof Uint8Array ? Buffer.from(item).toString('base64') : item,
  );
}

/** The lines `stats` prints. */
export function statsLines(target: string, stats: StoreStats): string[] {
  const oldest =
    stats.oldestLeaseAgeMs === null ? 'none in progress' : span(stats.oldestLeaseAgeMs);
  return [
    `${target}`,
    `  in progress        ${stats.inProgress}`,
    `  completed          ${stats.completed}`,
    `  stale leases       ${stats.staleLeases} (holders that died or hung; reserved for their request, or awaiting purge)`,
    `  oldest live lease  ${oldest}`,
  ];
}
