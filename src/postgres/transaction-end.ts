/**
 * What a `runInTransaction` run records when its transaction ended under the handler anyway: a `COMMIT` or
 * `ROLLBACK` went through `tx` in a form the statement guard (`transaction-control.ts`) could not read (a
 * submittable that does not show its text, a statement the scanner reads otherwise than the server). Left
 * as it was, a `ROLLBACK` dropped the claim and the writes after it committed in autocommit with no record
 * (the retry charged again), and a `COMMIT` committed the claim, which then answered in progress for the
 * lease's hour until a takeover ran the handler again.
 *
 * From the end on, `tx` refuses every statement before sending it (`transactional.ts`). What ran after the
 * end through the channel that ended it cannot be read (`ROLLBACK; INSERT …` in one hidden text), nor can a
 * statement the driver had queued before the end's answer came back be stopped: so, as the SQLite mode does
 * for a connection it could not guard, the run records its error as the key's outcome whenever writes may
 * have committed, and a retry gets it back (`ReplayedError`) instead of running the handler again:
 * - the claim is still ours, in progress: a `COMMIT` committed it with the writes before it. It is
 *   completed with the error;
 * - completed by us: a `COMMIT` in `beforeCommit` committed the record, with the handler's value, which a
 *   retry replays;
 * - gone: rolled back with the writes before the end. The key is claimed anew and completed with the error,
 *   unless another attempt holds it by then (which the error then says).
 *
 * All in one short transaction of its own, read committed, whose `lock_timeout` keeps a row held elsewhere
 * (a duplicate's transaction that claimed the freed key, a `PREPARE TRANSACTION`'s claim) from holding the
 * run up: the key is then another attempt's, and left to it.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import { encodeErrorOutcome } from '../core/outcome.js';
import { RecordStatus } from '../core/record.js';
import type { PgQueryable } from './client.js';
import type { Operations } from './operations.js';
import { BEGIN_READ_COMMITTED } from './own-transaction.js';

/**
 * What committed of a run whose transaction ended under the handler: `recorded` (the key is completed with
 * the run's error: a `COMMIT` committed the claim, or the claim was rolled back and claimed anew),
 * `completed` (a `COMMIT` in `beforeCommit` committed the record, completed with the handler's value) or
 * `unrecorded` (writes may have committed, and the error could not be recorded: another attempt holds the
 * key, or the database failed).
 */
export type EndedCommit = 'recorded' | 'completed' | 'unrecorded';

const CAUSE =
  'runInTransaction: the transaction ended under the handler (a COMMIT or ROLLBACK went through `tx` in a ' +
  'form the guard could not read, such as a submittable that does not show its text). ';

/** The error of a run whose transaction ended under the handler (see the module and {@link EndedCommit}). */
export function transactionEndedError(committed: EndedCommit): InvalidOptionsError {
  const consequence = {
    recorded:
      'Writes may have committed (before a COMMIT, or after a ROLLBACK in autocommit): the key is ' +
      'completed with this error as its outcome, so a retry gets it back (ReplayedError) instead of ' +
      'running the handler again.',
    completed:
      "A COMMIT committed the record, completed with the handler's value, with the writes before it: a " +
      'retry replays that value.',
    unrecorded:
      'Writes may have committed, and this error could not be recorded for the key (another attempt ' +
      'holds it, or the database failed): a retry may run the handler again.',
  }[committed];
  return new InvalidOptionsError(CAUSE + consequence);
}

/** The refusal of a statement sent through `tx` once its transaction has ended under the handler. */
export function statementAfterEndError(): InvalidOptionsError {
  return new InvalidOptionsError(
    'runInTransaction: the transaction the handler runs in has ended (a COMMIT or ROLLBACK went through ' +
      '`tx` in a form the guard could not read, such as a submittable that does not show its text). The ' +
      'statement was not run: it would have committed on its own, with no record.',
  );
}

/** The run whose transaction ended: its key and claim, and how its outcome is kept. */
export interface EndedRun {
  storageKey: string;
  fingerprint: string;
  token: number;
  /** The lease of a claim made anew (it only has to outlast the recording transaction). */
  leaseMs: number;
  retentionMs: number;
}

/** What {@link recordEnd} did: the run's error, whether an outcome is stored, whether the connection broke. */
export interface EndRecord {
  error: InvalidOptionsError;
  stored: boolean;
  /** The recording failed and so did its ROLLBACK: discard the connection. */
  broken: boolean;
}

// How long the recording waits for a row another transaction holds: such a row is another attempt's.
const RECORD_LOCK_TIMEOUT = '100ms';

/**
 * Record what committed of `run`, whose transaction ended under the handler, on `client` (idle by now):
 * see the module.
 */
export async function recordEnd(
  ops: Operations,
  client: PgQueryable,
  run: EndedRun,
): Promise<EndRecord> {
  const { storageKey: key, token, retentionMs } = run;
  const outcome = encodeErrorOutcome(transactionEndedError('recorded'));
  let committed: EndedCommit = 'unrecorded';
  try {
    await client.query(
      `${BEGIN_READ_COMMITTED}; SELECT set_config('lock_timeout', '${RECORD_LOCK_TIMEOUT}', true)`,
    );
    const record = await ops.get(client, key);
    if (record?.token === token && record.status === RecordStatus.Completed) {
      committed = 'completed';
    } else if (record?.token === token && record.status === RecordStatus.InProgress) {
      if (await ops.complete(client, key, token, outcome, retentionMs)) committed = 'recorded';
    } else {
      const claim = await ops.claim(client, key, {
        fingerprint: run.fingerprint,
        leaseMs: run.leaseMs,
      });
      if (claim.claimed && (await ops.complete(client, key, claim.token, outcome, retentionMs))) {
        committed = 'recorded';
      }
    }
    await client.query('COMMIT');
  } catch {
    // A lock held elsewhere (55P03: another attempt's), or the database failed: nothing of it was
    // recorded.
    committed = 'unrecorded';
    const broken = await client.query('ROLLBACK').then(
      () => false,
      () => true,
    );
    return { error: transactionEndedError(committed), stored: false, broken };
  }
  return {
    error: transactionEndedError(committed),
    stored: committed !== 'unrecorded',
    broken: false,
  };
}
