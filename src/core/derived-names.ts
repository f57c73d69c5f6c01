/**
 * The objects a records table or an outbox creates beside its table, named after it (`<table>_migrations`,
 * `<table>_token_seq`…), and the check that none of them is taken. Two tables configured on their own on
 * one database can collide: a records table named `orders_migrations` is the name of the records table
 * `orders`'s migrations table. Migrating the second one then failed with the database's own
 * `relation "orders_migrations" already exists` (reported as an outage, naming neither table) or, the other
 * way round, read the first one's records table as its migrations table (`column "id" does not exist`).
 * The migrators refuse instead, before creating anything, naming both objects.
 * @module
 */
import { InvalidOptionsError } from './errors.js';

/** One object named after its table: `<table><suffix>`, and what it is for, as messages say it. */
export interface DerivedObject {
  /** Appended to the table's name; `''` for the table itself. */
  suffix: string;
  /** What the object is (`token sequence`), for messages. */
  role: string;
}

/** What creates a set of objects: a records table or an outbox, on one database. */
export interface ObjectFamily {
  /** `records table` or `outbox`. */
  kind: string;
  /** Its objects; the first is the table itself (suffix `''`), one is its migrations table. */
  objects: readonly DerivedObject[];
}

const MIGRATIONS: DerivedObject = { suffix: '_migrations', role: 'migrations table' };

/** The PostgreSQL records table's objects (migration 0001 and `migrate()`'s migrations table). */
export const POSTGRES_STORE_OBJECTS: ObjectFamily = {
  kind: 'records table',
  objects: [
    { suffix: '', role: 'records table' },
    { suffix: '_token_seq', role: 'token sequence' },
    { suffix: '_expires_at_idx', role: 'expiry index' },
    MIGRATIONS,
  ],
};

/** The PostgreSQL outbox's objects (its migration 0001 and `migrateOutbox()`'s migrations table). */
export const POSTGRES_OUTBOX_OBJECTS: ObjectFamily = {
  kind: 'outbox',
  objects: [
    { suffix: '', role: 'outbox table' },
    { suffix: '_message_id_key', role: 'message id constraint' },
    { suffix: '_pending_idx', role: 'pending index' },
    { suffix: '_sent_idx', role: 'sent index' },
    MIGRATIONS,
  ],
};

/** The SQLite records table's objects (migration 0001 and `migrate()`'s migrations table). */
export const SQLITE_STORE_OBJECTS: ObjectFamily = {
  kind: 'records table',
  objects: [
    { suffix: '', role: 'records table' },
    { suffix: '_expires_at', role: 'expiry index' },
    { suffix: '_meta', role: 'token counter table' },
    MIGRATIONS,
  ],
};

/** The SQLite outbox's objects (its migration 0001 and `migrateOutbox()`'s migrations table). */
export const SQLITE_OUTBOX_OBJECTS: ObjectFamily = {
  kind: 'outbox',
  objects: [
    { suffix: '', role: 'outbox table' },
    { suffix: '_pending_idx', role: 'pending index' },
    { suffix: '_sent_idx', role: 'sent index' },
    MIGRATIONS,
  ],
};

/** The families that may share a PostgreSQL schema. */
export const POSTGRES_FAMILIES: readonly ObjectFamily[] = [
  POSTGRES_STORE_OBJECTS,
  POSTGRES_OUTBOX_OBJECTS,
];

/** The families that may share a SQLite database. */
export const SQLITE_FAMILIES: readonly ObjectFamily[] = [
  SQLITE_STORE_OBJECTS,
  SQLITE_OUTBOX_OBJECTS,
];

/** An object found in the database under one of the names looked up. */
export interface ExistingObject {
  /** What the database calls it: `table`, `index`, `sequence`, `view`… */
  type: string;
  /** A table with exactly the columns of a migrations table (`id`, `name`, `applied_at`). */
  migrationsShaped: boolean;
}

/**
 * The names to look up for `table` of `family` on a database where `families` may also live: its own
 * objects, the tables its name may be derived from (`orders` for `orders_token_seq`), and the migrations
 * tables that tell a table of this package from another application's.
 */
export function namesToLookUp(
  table: string,
  family: ObjectFamily,
  families: readonly ObjectFamily[],
): string[] {
  const own = family.objects.map((object) => table + object.suffix);
  const bases = families
    .flatMap((other) => other.objects)
    // Lowercased: SQLite compares names without case (an extra name looked up on PostgreSQL is harmless).
    .filter((object) => object.suffix !== '' && table.toLowerCase().endsWith(object.suffix))
    .map((object) => table.slice(0, -object.suffix.length))
    .filter((base) => base !== '');
  return [...new Set([...own, ...bases, ...own.map((name) => `${name}_migrations`)])];
}

/** Where the check runs and how names are shown. */
export interface DerivedNamesCheck {
  /** `migrate` or `migrateOutbox`, first in the message. */
  operation: string;
  /** The table being migrated, unqualified. */
  table: string;
  family: ObjectFamily;
  /** Every family that may share the database, to say whose object a taken name is. */
  families: readonly ObjectFamily[];
  /** The objects found under {@link namesToLookUp}'s names (SQLite: keys lowercased). */
  existing: ReadonlyMap<string, ExistingObject>;
  /** Whether the table's first migration is still to apply: its objects are about to be created. */
  creating: boolean;
  /** `schema.name` on PostgreSQL, the name on SQLite. */
  qualify(name: string): string;
  /** SQLite compares names without case. */
  caseInsensitive?: boolean;
}

/**
 * Refuse to migrate a table whose objects' names are taken: its migrations table by anything but a
 * migrations table, and, when the table is about to be created, any of its objects by anything at all.
 * @throws InvalidOptionsError naming the object to create and what already has its name.
 */
export function checkDerivedNames(check: DerivedNamesCheck): void {
  const key = (name: string) => (check.caseInsensitive === true ? name.toLowerCase() : name);
  for (const object of check.family.objects) {
    const name = check.table + object.suffix;
    const found = check.existing.get(key(name));
    if (found === undefined) continue;
    const harmless =
      object === MIGRATIONS ? found.type === 'table' && found.migrationsShaped : !check.creating;
    if (harmless) continue;
    const mine =
      object.suffix === ''
        ? `the ${check.family.kind} ${check.qualify(name)}`
        : `the ${object.role} of the ${check.family.kind} ${check.qualify(check.table)} (${check.qualify(name)})`;
    throw new InvalidOptionsError(
      `${check.operation}: cannot create ${mine}: ${check.qualify(name)} is already ${describe(check, name, found, key)}. ` +
        'A records table or an outbox must not be named after the objects of another one on the same ' +
        'database (<table>_migrations, and each object listed in its migrations): give one of them another name',
    );
  }
}

/** `a sequence (the token sequence of the records table public.orders)`, as far as the catalog tells. */
function describe(
  check: DerivedNamesCheck,
  name: string,
  found: ExistingObject,
  key: (name: string) => string,
): string {
  const article = /^[aeiou]/.test(found.type) ? 'an' : 'a';
  const what = `${article} ${found.type}`;
  for (const family of check.families) {
    for (const object of family.objects) {
      if (object.suffix === '' || !key(name).endsWith(key(object.suffix))) continue;
      const base = name.slice(0, -object.suffix.length);
      if (base === '' || !check.existing.has(key(base))) continue;
      const kinds = check.families
        .filter((other) => other.objects.some((o) => o.suffix === object.suffix))
        .map((other) => other.kind);
      return `${what} (the ${object.role} of the ${kinds.join(' or ')} ${check.qualify(base)})`;
    }
  }
  if (found.type === 'table' && check.existing.has(key(`${name}_migrations`))) {
    return `${what} (a records table or an outbox: it has its own ${check.qualify(`${name}_migrations`)})`;
  }
  return what;
}
