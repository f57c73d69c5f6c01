/**
 * The store's statements, bound to one table and runnable on any {@link PgQueryable}: the pool (one
 * autocommit statement per call) or a transaction's own connection (the transactional mode). Each state
 * change is exactly one SQL statement.
 * @module
 */
import { createHash } from 'node:crypto';
import { bufferView } from '../core/bytes.js';
import { StoreUnavailableError } from '../core/errors.js';
import {
  type ClaimResult,
  type IdempotencyRecord,
  type InProgressRecord,
  RecordStatus,
  reservationMs,
} from '../core/record.js';
import type {
  ClaimOptions,
  ClaimRequest,
  CompleteRequest,
  CrashedRecordInspection,
  RecordInspection,
  StoreStats,
} from '../store/store.js';
import { isBatchFunctionUnusable } from './batch-functions.js';
import {
  isNodePostgres,
  type PgQueryable,
  type PgQueryResult,
  SqlState,
  sqlState,
} from './client.js';
import { storedFingerprint, withRequestFingerprint } from './fingerprint-text.js';
import { batchFunctionNames, renderSql, type TableNames } from './identifiers.js';
import { rerunAtReadCommitted } from './read-committed.js';
import { type RecordRow, rowToClaimResult, rowToRecord, toSafeInteger } from './row.js';
import * as sql from './sql.gen.js';

// A claim returns no row only when the blocking row committed after the statement's snapshot; the next
// run sees it. More than a handful in a row means something else is wrong.
const CLAIM_ATTEMPTS = 10;

// The batch statements are planned on every call, never kept as named prepared statements: after five
// runs PostgreSQL may switch a prepared statement to a generic plan, costed with the statistics of that
// moment. A records table starts empty, so that plan joins the batch's keys by a sequential scan, and the
// connection keeps it while the table grows: a consumer draining 20,000 messages fell to 1% of its rate.
// Planning a batch costs a fraction of a millisecond, shared by all its keys; single-key statements
// look a key up by its primary key whatever the statistics, so they stay prepared. On a schema migrated
// to 0003 the batches run inside functions instead, which keep the parse and never plan generically; these
// statements are then only the fallback for a schema without them.
const PLANNED_PER_CALL: ReadonlySet<string> = new Set(['claimMany', 'completeMany']);

/** The parameters of a claim batch (`claim-many.sql` and the functions): one array per column. */
function claimValues(requests: readonly ClaimRequest[]): unknown[] {
  return [
    requests.map((request) => request.key),
    requests.map((request) => storedFingerprint(request.fingerprint)),
    requests.map((request) => request.leaseMs),
    // The statements apply the same rule; deciding it here also turns a missing or NaN value into 0,
    // which PostgreSQL would otherwise compare as greater than any lease.
    requests.map(reservationMs),
  ];
}

/**
 * A claim batch's results by key (rows of `claim-many.sql` or of the functions), each blocking record
 * carrying its request's own fingerprint when it holds the stored form of it (see `./fingerprint-text.ts`).
 */
function claimResults(
  requests: readonly ClaimRequest[],
  rows: ReadonlyArray<RecordRow & { key: string }>,
): Map<string, ClaimResult> {
  const results = new Map<string, ClaimResult>();
  for (const row of rows) results.set(row.key, rowToClaimResult(row));
  for (const request of requests) {
    const result = results.get(request.key);
    if (result !== undefined && !result.claimed) {
      results.set(request.key, withRequestFingerprint(result, request.fingerprint));
    }
  }
  return results;
}

/** The parameters of a completion batch (`complete-many.sql` and the functions). */
function completeValues(requests: readonly CompleteRequest[]): unknown[] {
  return [
    requests.map((request) => request.key),
    requests.map((request) => request.token),
    requests.map((request) => bufferView(request.outcome)),
    requests.map((request) => request.retentionMs),
  ];
}

/** A row of `load-steps.sql`: one step (its bytes in base64), or a NULL name when the record has none. */
interface StepRow {
  name: string | null;
  value: string | null;
}

/** A row of `inspect.sql`: a record row, its reservation, its steps (jsonb, parsed) and the clock. */
interface InspectRow extends RecordRow {
  reserved_until_ms: number | null;
  steps: Record<string, string> | null;
  now_ms: number;
}

/** The record of a row of `inspect.sql` (or `list-crashed.sql`), with its reservation and steps. */
function inspectedRecord(row: InspectRow): IdempotencyRecord {
  const record = rowToRecord(row);
  if (record.status === RecordStatus.InProgress) {
    if (row.reserved_until_ms !== null) record.reservedUntil = row.reserved_until_ms;
    if (row.steps !== null) {
      record.steps = rowsToSteps(
        Object.entries(row.steps).map(([name, value]) => ({ name, value })),
      );
    }
  }
  return record;
}

/**
 * The steps of `load-steps.sql`'s rows, by name. Built with `Object.fromEntries`, so every valid name
 * (`__proto__` included) is an own property; each value is decoded into bytes of its own (a small
 * `Buffer.from` is a view of Node's shared pool, so it is copied out).
 */
function rowsToSteps(rows: readonly StepRow[]): Record<string, Uint8Array> {
  return Object.fromEntries(
    rows.flatMap((row) =>
      row.name === null || row.value === null
        ? []
        : [[row.name, new Uint8Array(Buffer.from(row.value, 'base64'))]],
    ),
  );
}

/** The statements of one records table. */
export interface Operations {
  /** Quoted names the statements were rendered with. */
  readonly names: TableNames;
  /**
   * `claim.sql`, re-run when the blocking row committed after its snapshot. Waits for a row another
   * transaction holds as long as the transaction it runs in allows: the transactional mode's claim.
   */
  claim(db: PgQueryable, key: string, options: ClaimOptions): Promise<ClaimResult>;
  /**
   * {@link Operations.claim} waiting at most 100 ms for any lock, then rejecting with SQLSTATE 55P03 (nothing
   * applied): the function of migration 0008 (`<table>_claim_one`), whose lock timeout bounds the wait for
   * the table's lock as well as for a row another transaction holds. On a schema without it,
   * `claim-bounded.sql`, whose timeout bounds the row's wait only (PostgreSQL locks the table before the
   * statement runs). The store's claim sent alone, in autocommit only: run in an explicit transaction,
   * claim-bounded's transaction-local `lock_timeout` would last until that transaction ends. See
   * `claimUnlessHeld` in `./held-key.ts`.
   */
  claimBounded(db: PgQueryable, key: string, options: ClaimOptions): Promise<ClaimResult>;
  /** `complete.sql`: true when completed now or already by this token. */
  complete(
    db: PgQueryable,
    key: string,
    token: number,
    outcome: Uint8Array,
    retentionMs: number,
  ): Promise<boolean>;
  /**
   * `claim-many.sql`: claims of distinct keys in one statement. A key missing from the map is one whose
   * blocking row committed after the statement's snapshot: claim it again on its own.
   */
  claimDistinct(
    db: PgQueryable,
    requests: readonly ClaimRequest[],
  ): Promise<Map<string, ClaimResult>>;
  /** `complete-many.sql`: completions of distinct keys in one statement; the keys that are completed. */
  completeDistinct(db: PgQueryable, requests: readonly CompleteRequest[]): Promise<Set<string>>;
  /**
   * Completions of distinct keys, then claims of distinct keys, in one statement (the function of
   * migration 0004): what {@link Operations.completeDistinct} and {@link Operations.claimDistinct} return.
   * `undefined` when the function cannot be used (a schema not yet migrated to 0004, or a role that may
   * not execute it): send the two batches instead.
   */
  completeAndClaimDistinct(
    db: PgQueryable,
    completes: readonly CompleteRequest[],
    claims: readonly ClaimRequest[],
  ): Promise<{ completed: Set<string>; claimed: Map<string, ClaimResult> } | undefined>;
  /** `release.sql`: true when this token's live lease was deleted. */
  release(db: PgQueryable, key: string, token: number): Promise<boolean>;
  /** `extend.sql`: true when this token's live lease was pushed. */
  extend(db: PgQueryable, key: string, token: number, leaseMs: number): Promise<boolean>;
  /** `save-step.sql`: true when the step was recorded on this token's live lease. */
  saveStep(
    db: PgQueryable,
    key: string,
    token: number,
    name: string,
    value: Uint8Array,
  ): Promise<boolean>;
  /** `load-steps.sql`: the steps recorded on this token's live lease; `undefined` when fenced out. */
  loadSteps(
    db: PgQueryable,
    key: string,
    token: number,
  ): Promise<Record<string, Uint8Array> | undefined>;
  /** `get.sql`: the live record, if any. */
  get(db: PgQueryable, key: string): Promise<IdempotencyRecord | undefined>;
  /** `inspect.sql`: the live record or a reserved dead lease, with the database clock. */
  inspect(db: PgQueryable, key: string): Promise<RecordInspection | undefined>;
  /**
   * `list-crashed.sql`: up to `rows` crashed claims after the key `after` (from the first key when
   * absent), in byte order of their keys, each with the database clock.
   */
  listCrashed(
    db: PgQueryable,
    after: string | undefined,
    rows: number,
  ): Promise<CrashedRecordInspection[]>;
  /** `delete-record.sql`: true when a live record was removed. */
  delete(db: PgQueryable, key: string): Promise<boolean>;
  /** `purge.sql`: rows deleted in one batch of at most `limit`. */
  purge(db: PgQueryable, limit: number): Promise<number>;
  /** `stats.sql`: counts by status. */
  stats(db: PgQueryable): Promise<StoreStats>;
}

/** How statements are sent. */
export interface OperationsOptions {
  /**
   * Send statements as named prepared statements on node-postgres clients (planned once per
   * connection instead of on every call). `'auto'` prepares on node-postgres and sends plain text to
   * anything else. @default 'auto'
   */
  prepare?: boolean | 'auto';
  /**
   * Send the single-key statements through the functions of migration 0008 (`<table>_claim_one`, …), whose
   * lock timeout bounds a claim's and a release's wait for the table's lock too (completions, extensions and
   * steps wait: they come after the handler's effect), falling back to the statements on a schema without
   * them. For autocommit callers only (the store): inside a transaction, the call of a missing
   * function would abort it. @default false
   */
  singleFunctions?: boolean;
  /**
   * Run a state change, a batch or `loadSteps` that PostgreSQL refused with a serialization failure (40001:
   * a `default_transaction_isolation` of repeatable read or serializable) once more, in a read committed
   * transaction of its own (see `./read-committed.ts`). For autocommit callers only (the store): inside a
   * transaction, a 40001 has aborted it. @default false
   */
  rerunAtReadCommitted?: boolean;
}

// The tables warned about by warnUnboundedClaims in this process: one warning each, however many stores.
const warnedUnbounded = new Set<string>();

/**
 * Say once per table that its claims fell back to `claim-bounded.sql` (no `<table>_claim_one`: migration 0008
 * not applied, or EXECUTE on it revoked from this role). That statement bounds the wait for a row only: while
 * another session holds or awaits a lock on the table (an `ALTER TABLE`, a `VACUUM FULL`, a migration queued
 * behind a long transaction) every claim waits as long as it does, and every request hangs. Nothing fails
 * meanwhile, so without this the cause shows only in the incident.
 */
function warnUnboundedClaims(names: TableNames, functionName: string): void {
  const table = `${names.schemaName}.${names.tableName}`;
  if (warnedUnbounded.has(table)) return;
  warnedUnbounded.add(table);
  process.emitWarning(
    `idempotency-kit: the PostgreSQL records table ${table} has no usable ${names.schemaName}.${functionName} ` +
      '(migration 0008 not applied, or EXECUTE on it not granted to this role): claims fall back to a ' +
      'statement whose wait for a lock on the table is unbounded, so every request hangs while another ' +
      'session holds one (ALTER TABLE, VACUUM FULL, a queued migration). Run migrate() (or `idempotency-kit ' +
      'migrate`) and grant EXECUTE on the table’s functions.',
    { code: 'IDEMPOTENCY_KIT_POSTGRES_UNBOUNDED_CLAIMS' },
  );
}

/** The single-key operations that migration 0008 gives a function of its own. */
type SingleOperation = 'claimBounded' | 'complete' | 'extend' | 'release' | 'saveStep';

type NamedQuery = (config: {
  name: string;
  text: string;
  values?: unknown[];
}) => Promise<PgQueryResult>;

/** Render every statement for `names`. */
export function createOperations(names: TableNames, options: OperationsOptions = {}): Operations {
  const prepare = options.prepare ?? 'auto';
  // The name is derived from the text, so two stores on different tables sharing a connection never
  // reuse one name for two statements (node-postgres refuses that).
  const statementName = (sqlText: string) =>
    `ik_${createHash('sha256').update(sqlText).digest('hex').slice(0, 24)}`;
  const rendered = {
    claim: renderSql(sql.claim, names),
    claimBounded: renderSql(sql.claimBounded, names),
    complete: renderSql(sql.complete, names),
    claimMany: renderSql(sql.claimMany, names),
    completeMany: renderSql(sql.completeMany, names),
    release: renderSql(sql.release, names),
    extend: renderSql(sql.extend, names),
    saveStep: renderSql(sql.saveStep, names),
    loadSteps: renderSql(sql.loadSteps, names),
    get: renderSql(sql.get, names),
    inspect: renderSql(sql.inspect, names),
    listCrashed: renderSql(sql.listCrashed, names),
    deleteRecord: renderSql(sql.deleteRecord, names),
    purge: renderSql(sql.purge, names),
    stats: renderSql(sql.stats, names),
    // The same batches through the functions of migration 0003 (parsed once per connection), the claims
    // in the versions of migration 0005 that take the reservations too.
    claimManyCall: `SELECT * FROM ${names.claimManyFunction}($1, $2, $3, $4)`,
    completeManyCall: `SELECT * FROM ${names.completeManyFunction}($1, $2, $3, $4)`,
    completeClaimCall: `SELECT * FROM ${names.completeClaimFunction}($1, $2, $3, $4, $5, $6, $7, $8)`,
    // The single-key statements through the functions of migration 0008, whose lock timeout bounds the
    // table's lock too. A call locks nothing of the table itself: the function's body does, under its SET
    // clause. complete's answers complete.sql's `ok`; extend's, release's and saveStep's return a row only
    // if the function changed one, as their statements' row counts say.
    claimOneCall: `SELECT * FROM ${names.claimOneFunction}($1, $2, $3, $4)`,
    completeOneCall: `SELECT ${names.completeOneFunction}($1, $2, $3, $4) AS ok`,
    extendOneCall: `SELECT 1 FROM ${names.extendOneFunction}($1, $2, $3) AS changed WHERE changed`,
    releaseOneCall: `SELECT 1 FROM ${names.releaseOneFunction}($1, $2) AS changed WHERE changed`,
    saveStepOneCall: `SELECT 1 FROM ${names.saveStepOneFunction}($1, $2, $3, $4) AS changed WHERE changed`,
  };
  const statements = Object.fromEntries(
    Object.entries(rendered).map(([op, sqlText]) => [
      op,
      { text: sqlText, name: statementName(sqlText) },
    ]),
  ) as Record<keyof typeof rendered, { text: string; name: string }>;

  function run(
    db: PgQueryable,
    op: keyof typeof rendered,
    values?: unknown[],
  ): Promise<PgQueryResult> {
    const statement = statements[op];
    if (
      !PLANNED_PER_CALL.has(op) &&
      (prepare === true || (prepare === 'auto' && isNodePostgres(db)))
    ) {
      const named = db.query as unknown as NamedQuery;
      return named.call(db, { name: statement.name, text: statement.text, values: values ?? [] });
    }
    return db.query(statement.text, values);
  }

  const functionNames = batchFunctionNames(names.tableName);
  // Whether the batch functions can be used: assumed until a call finds one missing (a schema not yet
  // migrated to 0003) or not executable by this role; then the batch statements are sent instead, for the
  // life of this store.
  let batchFunctions = true;
  // The same for the function of 0004, which a schema migrated to 0003 may lack.
  let completeClaimFunction = true;
  // The same for each function of 0008, by the operation it serves; without it, the statement (whose lock
  // waits are bounded for a row only: claim-bounded.sql; or not at all). None at all unless asked for.
  const singleCalls = {
    claimBounded: { call: 'claimOneCall', name: functionNames.claimOne },
    complete: { call: 'completeOneCall', name: functionNames.completeOne },
    extend: { call: 'extendOneCall', name: functionNames.extendOne },
    release: { call: 'releaseOneCall', name: functionNames.releaseOne },
    saveStep: { call: 'saveStepOneCall', name: functionNames.saveStepOne },
  } as const satisfies Record<SingleOperation, { call: keyof typeof rendered; name: string }>;
  const singleFunctionless = new Set<SingleOperation>(
    options.singleFunctions === true ? [] : (Object.keys(singleCalls) as SingleOperation[]),
  );
  // Send a statement in autocommit, and again at read committed after a 40001 when asked to.
  const autocommit: <R>(db: PgQueryable, send: (db: PgQueryable) => Promise<R>) => Promise<R> =
    options.rerunAtReadCommitted === true ? rerunAtReadCommitted : (db, send) => send(db);

  /**
   * Run a batch through its function, or through its statement when the function cannot be used (see
   * {@link isBatchFunctionUnusable}); any other error is the batch's own and is thrown.
   */
  function runBatch(
    db: PgQueryable,
    op: 'claimMany' | 'completeMany',
    values: unknown[],
  ): Promise<PgQueryResult> {
    return autocommit(db, (conn) => runBatchOnce(conn, op, values));
  }

  async function runBatchOnce(
    db: PgQueryable,
    op: 'claimMany' | 'completeMany',
    values: unknown[],
  ): Promise<PgQueryResult> {
    if (batchFunctions) {
      try {
        return await run(db, op === 'claimMany' ? 'claimManyCall' : 'completeManyCall', values);
      } catch (error) {
        if (!isBatchFunctionUnusable(error, functionNames[op])) throw error;
        batchFunctions = false;
      }
    }
    return run(db, op, values);
  }

  /**
   * Send a single-key operation once: through its function of migration 0008, or through its statement on
   * a schema without it (see {@link isBatchFunctionUnusable}: the same two causes).
   */
  function runSingle(
    db: PgQueryable,
    op: SingleOperation,
    values: unknown[],
  ): Promise<PgQueryResult> {
    return autocommit(db, (conn) => runSingleOnce(conn, op, values));
  }

  async function runSingleOnce(
    db: PgQueryable,
    op: SingleOperation,
    values: unknown[],
  ): Promise<PgQueryResult> {
    if (!singleFunctionless.has(op)) {
      try {
        return await run(db, singleCalls[op].call, values);
      } catch (error) {
        if (!isBatchFunctionUnusable(error, singleCalls[op].name)) throw error;
        singleFunctionless.add(op);
        if (op === 'claimBounded') warnUnboundedClaims(names, singleCalls[op].name);
      }
    }
    return run(db, op, values);
  }

  /** Run a single-key claim statement until it returns its row (see {@link CLAIM_ATTEMPTS}). */
  async function claimWith(
    op: 'claim' | 'claimBounded',
    db: PgQueryable,
    key: string,
    options: ClaimOptions,
  ): Promise<ClaimResult> {
    const values = [
      key,
      storedFingerprint(options.fingerprint),
      options.leaseMs,
      reservationMs(options),
    ];
    for (let attempt = 1; attempt <= CLAIM_ATTEMPTS; attempt++) {
      let rows: unknown[];
      try {
        ({ rows } =
          op === 'claimBounded' ? await runSingle(db, op, values) : await run(db, op, values));
      } catch (error) {
        // claim-bounded runs in autocommit only, so on a server, database or role whose
        // default_transaction_isolation is repeatable read or serializable, the blocking row committed
        // after the snapshot raises 40001 instead of returning no row: the statement was a transaction of
        // its own and applied nothing, so it runs again, as for no row (a concurrent duplicate was an
        // outage). The store's runSingle runs it at read committed first (read-committed.ts); what gets here
        // is the rerun of a client that is not a pool. In the transactional mode's claim.sql the caller
        // retries the whole transaction instead.
        const again = op === 'claimBounded' && sqlState(error) === SqlState.SerializationFailure;
        if (again && attempt < CLAIM_ATTEMPTS) continue;
        throw error;
      }
      const row = rows[0] as RecordRow | undefined;
      if (row !== undefined)
        return withRequestFingerprint(rowToClaimResult(row), options.fingerprint);
    }
    throw new StoreUnavailableError(
      `PostgreSQL claim did not settle after ${CLAIM_ATTEMPTS} attempts (the row kept changing)`,
    );
  }

  return {
    names,
    claim: (db, key, options) => claimWith('claim', db, key, options),
    claimBounded: (db, key, options) => claimWith('claimBounded', db, key, options),
    async complete(db, key, token, outcome, retentionMs) {
      const { rows } = await runSingle(db, 'complete', [
        key,
        token,
        bufferView(outcome),
        retentionMs,
      ]);
      return (rows[0] as { ok?: boolean } | undefined)?.ok === true;
    },
    async claimDistinct(db, requests) {
      const { rows } = await runBatch(db, 'claimMany', claimValues(requests));
      return claimResults(requests, rows as Array<RecordRow & { key: string }>);
    },
    async completeDistinct(db, requests) {
      const { rows } = await runBatch(db, 'completeMany', completeValues(requests));
      return new Set((rows as Array<{ key: string }>).map((row) => row.key));
    },
    async completeAndClaimDistinct(db, completes, claims) {
      if (!completeClaimFunction) return undefined;
      let rows: unknown[];
      try {
        ({ rows } = await autocommit(db, (conn) =>
          run(conn, 'completeClaimCall', [...completeValues(completes), ...claimValues(claims)]),
        ));
      } catch (error) {
        if (!isBatchFunctionUnusable(error, functionNames.completeClaim)) throw error;
        completeClaimFunction = false;
        return undefined;
      }
      const completed = new Set<string>();
      const claimRows: Array<RecordRow & { key: string }> = [];
      for (const row of rows as Array<RecordRow & { key: string; completed: boolean | null }>) {
        if (row.completed === true) completed.add(row.key);
        else claimRows.push(row);
      }
      return { completed, claimed: claimResults(claims, claimRows) };
    },
    async release(db, key, token) {
      const { rowCount } = await runSingle(db, 'release', [key, token]);
      return rowCount === 1;
    },
    async extend(db, key, token, leaseMs) {
      const { rowCount } = await runSingle(db, 'extend', [key, token, leaseMs]);
      return rowCount === 1;
    },
    async saveStep(db, key, token, name, value) {
      // base64 text: a jsonb value holds text only (see save-step.sql).
      const { rowCount } = await runSingle(db, 'saveStep', [
        key,
        token,
        name,
        bufferView(value).toString('base64'),
      ]);
      return rowCount === 1;
    },
    async loadSteps(db, key, token) {
      const { rows } = await autocommit(db, (conn) => run(conn, 'loadSteps', [key, token]));
      return rows.length === 0 ? undefined : rowsToSteps(rows as StepRow[]);
    },
    async get(db, key) {
      const { rows } = await run(db, 'get', [key]);
      const row = rows[0] as RecordRow | undefined;
      return row === undefined ? undefined : rowToRecord(row);
    },
    async inspect(db, key) {
      const { rows } = await run(db, 'inspect', [key]);
      const row = rows[0] as InspectRow | undefined;
      return row === undefined ? undefined : { now: row.now_ms, record: inspectedRecord(row) };
    },
    async listCrashed(db, after, limit) {
      const { rows } = await run(db, 'listCrashed', [after ?? null, limit]);
      return (rows as Array<InspectRow & { key: string }>).map((row) => ({
        key: row.key,
        now: row.now_ms,
        record: inspectedRecord(row) as InProgressRecord,
      }));
    },
    async delete(db, key) {
      const { rows } = await run(db, 'deleteRecord', [key]);
      return (rows as Array<{ live: boolean }>).some((row) => row.live);
    },
    async purge(db, limit) {
      const { rows } = await run(db, 'purge', [limit]);
      return toSafeInteger((rows[0] as { deleted: string }).deleted, 'deleted');
    },
    async stats(db) {
      const { rows } = await run(db, 'stats');
      const row = rows[0] as {
        in_progress: string;
        completed: string;
        stale_leases: string;
        oldest_lease_age_ms: number | null;
      };
      return {
        inProgress: toSafeInteger(row.in_progress, 'in_progress'),
        completed: toSafeInteger(row.completed, 'completed'),
        staleLeases: toSafeInteger(row.stale_leases, 'stale_leases'),
        oldestLeaseAgeMs:
          row.oldest_lease_age_ms === null ? null : Math.max(0, row.oldest_lease_age_ms),
      };
    },
  };
}
