// What differs between the two SQL engines, in one place. Repositories write SQL both engines read
// alike (ON CONFLICT ... DO UPDATE, RETURNING, IS NOT DISTINCT FROM, CAST(x AS BIGINT), ||, substr,
// coalesce) and ask their executor's dialect (`ex.dialect`) for the rest. Placeholders are not
// here: every statement is written with ? and ?N, which the PostgreSQL driver numbers ($N).
//
// PostgreSQL is made to compare and sort as SQLite does, so results and paging are the same on
// both: text columns use the "C" collation (byte order, as SQLite's BINARY; the database's own
// collation would also break the topic-range scans of retained messages), NULLs sort first
// ascending and last descending, and booleans read back as 1 and 0 (db.ts).
import type { ColumnType } from "../core/columns.ts";

export interface Dialect {
  readonly name: "sqlite" | "postgres";
  /** The column type a collection column of type `t` is stored in. */
  columnType(t: ColumnType): string;
  /** The insertion-order key of a collection's table, added to its CREATE TABLE (SQLite's is the
   *  implicit rowid; PostgreSQL has none, so the table gets a column of that name). */
  readonly rowidColumn: string;
  /** An index column: NULLs placed where the engine's ORDER BY puts them, so the index serves it. */
  indexColumn(col: string): string;
  /** An ORDER BY term with SQLite's NULL placement. */
  order(expr: string, desc: boolean): string;
  /** A regular-expression match of `expr` (text) against the pattern bound at `param`. */
  regexp(expr: string, param: string): string;
  /** A pattern checked by regexForEngine, in the engine's syntax. */
  regexPattern(pattern: string): string;

  /** A top-level key of a JSON document kept as TEXT, as a value of the column type given (the
   *  custom columns of users, devices and edges). `key` passed checkName. */
  jsonField(doc: string, key: string, type: ColumnType): string;
  /** A key of a jsonb collection column, compared with values bound through jsonParam. */
  jsonKey(doc: string, key: string): string;
  /** The placeholder and the bound value jsonKey's expression compares with. */
  readonly jsonParam: string;
  jsonScalar(v: string | number | boolean): unknown;
  /** The text of a JSON document's top-level string key (`key` a literal of the repositories). */
  jsonText(doc: string, key: string): string;
  /** A JSON document without the top-level key bound at `keyParam`. */
  jsonRemove(doc: string, keyParam: string): string;
  /** A JSON document (text) with its top-level `key` set to the JSON text bound at `valueParam`,
   *  in place when present (the other keys keep their order and text). */
  jsonSet(doc: string, key: string, valueParam: string): string;
  /** `expr` is one of the strings of the JSON array bound at `param`. */
  inJsonArray(expr: string, param: string): string;

  /** The larger of two values (SQLite's two-argument max()). */
  greatest(a: string, b: string): string;
  /** An integer as decimal text, zero-padded to `width` digits. */
  zeroPad(expr: string, width: number): string;
  /** 1-based position of `needle` in `haystack`, 0 when absent. */
  position(haystack: string, needle: string): string;
  /** 32 random hex digits. */
  readonly randomHex: string;

  /** A statement that makes the transaction that runs it the only one appending to the change log
   *  of the system bound at ?, until it ends; null where transactions are serial anyway (SQLite
   *  takes its write lock at BEGIN IMMEDIATE). See changesRepo.append. */
  readonly changeLogLock: string | null;
  /** A statement that holds off other nodes' migrations until the transaction ends (null: SQLite's
   *  write lock does). */
  readonly schemaLock: string | null;

  /** A statement of the migration history (written for SQLite) as this engine runs it. */
  ddl(sql: string): string;
  /** User tables of the database (schema introspection), sorted by name. */
  readonly tablesSql: string;
  /** The database's size in bytes, as `n`. */
  readonly sizeSql: string;
}

export const sqlite: Dialect = {
  name: "sqlite",
  columnType(t) {
    switch (t) {
      case "int": case "bigint": case "bool": return "INTEGER";
      case "float": case "double": return "REAL";
      case "blob": return "BLOB";
      default: return "TEXT";
    }
  },
  rowidColumn: "",
  indexColumn: (col) => col,
  order: (expr, desc) => `${expr} ${desc ? "DESC" : "ASC"}`,
  regexp: (expr, param) => `${expr} REGEXP ${param}`,
  regexPattern: (p) => p,
  jsonField: (doc, key) => `json_extract(${doc}, '$.${key}')`,
  jsonKey: (doc, key) => `json_extract(${doc}, '$.${key}')`,
  jsonParam: "?",
  // json_extract gives true and false as 1 and 0
  jsonScalar: (v) => (typeof v === "boolean" ? (v ? 1 : 0) : v),
  jsonText: (doc, key) => `json_extract(${doc}, '$.${key}')`,
  jsonRemove: (doc, keyParam) => `json_remove(${doc}, '$.' || ${keyParam})`,
  jsonSet: (doc, key, valueParam) => `json_set(${doc}, '$.${key}', json(${valueParam}))`,
  inJsonArray: (expr, param) => `${expr} IN (SELECT value FROM json_each(${param}))`,
  greatest: (a, b) => `max(${a}, ${b})`,
  zeroPad: (expr, width) => `printf('%0${width}d', ${expr})`,
  position: (haystack, needle) => `instr(${haystack}, ${needle})`,
  randomHex: "lower(hex(randomblob(16)))",
  changeLogLock: null,
  schemaLock: null,
  ddl: (sql) => sql,
  tablesSql: `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name`,
  sizeSql: `SELECT page_count * page_size AS n FROM pragma_page_count(), pragma_page_size()`,
};

const C = `COLLATE "C"`;

/** SQLite's column types in the migration history, as PostgreSQL declares them: INTEGER is 64-bit
 *  in SQLite (epoch milliseconds do not fit PostgreSQL's 32-bit INTEGER), an INTEGER PRIMARY KEY
 *  is SQLite's auto-assigned rowid. */
const DDL_TYPES: [RegExp, string][] = [
  [/\bINTEGER PRIMARY KEY( AUTOINCREMENT)?/g, "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"],
  [/\bINTEGER\b/g, "BIGINT"],
  [/\bREAL\b/g, "DOUBLE PRECISION"],
  [/\bBLOB\b/g, "BYTEA"],
  [/\bTEXT\b/g, `TEXT ${C}`],
];

export const postgres: Dialect = {
  name: "postgres",
  columnType(t) {
    switch (t) {
      case "int": case "bigint": return "BIGINT";
      case "float": case "double": return "DOUBLE PRECISION";
      case "bool": return "BOOLEAN";
      case "blob": return "BYTEA";
      case "jsonb": return "JSONB";
      case "uuid": return "UUID";
      default: return `TEXT ${C}`;
    }
  },
  rowidColumn: ", rowid BIGINT GENERATED BY DEFAULT AS IDENTITY UNIQUE",
  indexColumn: (col) => `${col} NULLS FIRST`,
  order: (expr, desc) => `${expr} ${desc ? "DESC NULLS LAST" : "ASC NULLS FIRST"}`,
  regexp: (expr, param) => `${expr} ~ ${param}`,
  // PostgreSQL's \b is a backspace; its word boundaries are \y and \Y
  regexPattern: (p) => p.replace(/\\(.)/g, (m, c: string) => (c === "b" ? "\\y" : c === "B" ? "\\Y" : m)),
  // documents are read as json, not jsonb: jsonb refuses text holding \u0000
  jsonField(doc, key, type) {
    const text = `(${doc}::json ->> '${key}')`;
    switch (type) {
      case "int": case "bigint": return `${text}::numeric`;
      case "float": case "double": return `${text}::double precision`;
      case "bool": return `(${text}::boolean)::int`;
      // a document or list compares on its JSON text, as json_extract gives it
      case "jsonb": return `(${doc}::json -> '${key}')::text`;
      default: return `${text} ${C}`;
    }
  },
  jsonKey: (doc, key) => `(${doc}::jsonb -> '${key}')`,
  jsonParam: "CAST(? AS jsonb)",
  jsonScalar: (v) => JSON.stringify(v),
  jsonText: (doc, key) => `(${doc}::json ->> '${key}')`,
  // json (not jsonb) keeps the keys' order and each value's text, \u0000 escapes included
  jsonRemove: (doc, keyParam) => `coalesce((SELECT json_object_agg(key, value ORDER BY o) FROM json_each(${doc}::json) WITH ORDINALITY AS e(key, value, o)
      WHERE key <> CAST(${keyParam} AS text))::text, '{}')`,
  jsonSet: (doc, key, valueParam) => `(SELECT json_object_agg(k, v ORDER BY o)::text FROM (
      SELECT key AS k, CASE WHEN key = '${key}' THEN CAST(${valueParam} AS json) ELSE value END AS v, o FROM json_each(${doc}::json) WITH ORDINALITY AS e(key, value, o)
      UNION ALL SELECT '${key}', CAST(${valueParam} AS json), 2147483647
      WHERE NOT EXISTS (SELECT 1 FROM json_each(${doc}::json) AS x WHERE x.key = '${key}')) AS kv)`,
  inJsonArray: (expr, param) => `${expr} IN (SELECT json_array_elements_text(CAST(${param} AS json)))`,
  greatest: (a, b) => `GREATEST(${a}, ${b})`,
  zeroPad: (expr, width) => `lpad(CAST(${expr} AS text), ${width}, '0')`,
  position: (haystack, needle) => `strpos(${haystack}, ${needle})`,
  randomHex: "md5(random()::text || clock_timestamp()::text)",
  // a lock of the transaction (released at its end) per system, in a key space of its own
  changeLogLock: `SELECT pg_advisory_xact_lock(hashtext('outpost.changes'), hashtext(?)) AS locked`,
  schemaLock: `SELECT pg_advisory_xact_lock(hashtext('outpost.schema')) AS locked`,
  ddl(sql) {
    if (!/^\s*(CREATE TABLE|ALTER TABLE \S+ ADD COLUMN)/i.test(sql)) return sql;
    for (const [re, to] of DDL_TYPES) sql = sql.replace(re, to);
    return sql;
  },
  tablesSql: `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY name`,
  sizeSql: `SELECT pg_database_size(current_database()) AS n`,
};
