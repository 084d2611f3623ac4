// The audit trail's rows: written in batches, read with the query language, trimmed to the
// retention bounds.
import type { ColumnMap, Condition, Query } from "../core/query.ts";
import { compileWhere } from "../core/query.ts";
import type { Executor } from "./db.ts";
import { listClauses } from "./sql.ts";

export interface AuditRow {
  id: number; system_key: string; time: string; response_time: number; asset_class: string; action_type: string;
  email: string; asset_id: string; changes: string; user_type: string;
}
/** A row to insert: its values in FIELDS' order (bound as they are, without an object per row). */
export type AuditValues = [system_key: string, time: string, response_time: number, asset_class: string, action_type: string, email: string,
  asset_id: string, changes: string, user_type: string];

/** What a query of the trail may name: its columns, as ClearBlade spells them. */
export const AUDIT_COLUMNS: ColumnMap = {
  id: { sql: "id", type: "bigint" }, system_key: { sql: "system_key", type: "string" }, time: { sql: "time", type: "string" },
  response_time: { sql: "response_time", type: "bigint" }, asset_class: { sql: "asset_class", type: "string" },
  action_type: { sql: "action_type", type: "string" }, email: { sql: "email", type: "string" }, asset_id: { sql: "asset_id", type: "string" },
  changes: { sql: "changes", type: "string" }, user_type: { sql: "user_type", type: "string" },
};

const FIELDS = ["system_key", "time", "response_time", "asset_class", "action_type", "email", "asset_id", "changes", "user_type"] as const;
/** Rows per INSERT statement, largest first: a batch is cut into these few sizes, so the engine
 *  prepares a handful of statements once, whatever the batch's length (SQLite binds at most 32,766
 *  parameters, PostgreSQL 65,535). */
const CHUNKS = [200, 50, 10, 1];
/** FIELDS' positions whose value is often the same in every row of a chunk (under a load: one
 *  system, one caller, one asset class, action and asset). On libSQL, binding a value costs about
 *  a third of a microsecond, a third of a row's insert once the rows are bound: a value every row
 *  of a chunk shares is bound once for the chunk (`INSERT ... SELECT ?, column1 FROM (VALUES ...)`). */
const SHAREABLE = [0, 3, 4, 5, 6, 8];
const ALL = FIELDS.map((_, i) => i);
/** How a chunk is bound: the positions bound once, the positions bound per row, and the INSERT of
 *  `n` rows so bound (by `n`); by the bits of the SHAREABLE positions bound once. */
interface Shape { once: number[]; each: number[]; sql: Map<number, string> }
const shapes = new Map<number, Shape>();
function shapeOf(shared: number): Shape {
  let s = shapes.get(shared);
  if (!s) {
    const once = SHAREABLE.filter((_, b) => shared & (1 << b));
    shapes.set(shared, (s = { once, each: ALL.filter((i) => !once.includes(i)), sql: new Map() }));
  }
  return s;
}
function insertSql(shape: Shape, n: number): string {
  let sql = shape.sql.get(n);
  if (sql !== undefined) return sql;
  const { once, each } = shape;
  const tuple = `(${each.map(() => "?").join(",")})`;
  const values = Array.from({ length: n }, () => tuple).join(",");
  sql = !once.length ? `INSERT INTO audit(${FIELDS.join(", ")}) VALUES ${values}`
    : `INSERT INTO audit(${[...once, ...each].map((i) => FIELDS[i]).join(", ")}) SELECT ${[...once.map(() => "?"), ...each.map((_, c) => `column${c + 1}`)].join(", ")} FROM (VALUES ${values})`;
  shape.sql.set(n, sql);
  return sql;
}

/** The SHAREABLE positions (as bits) whose value is the same in rows[from, from + n). */
function sharedIn(rows: AuditValues[], from: number, n: number): number {
  let shared = 0;
  const first = rows[from]!;
  SHAREABLE.forEach((i, b) => {
    for (let j = from + 1; j < from + n; j++) if (rows[j]![i] !== first[i]) return;
    shared |= 1 << b;
  });
  return shared;
}

/** `systemKey` null: every system's rows (a platform admin's view). */
const scope = (systemKey: string | null) => (systemKey === null ? { sql: "1 = 1", args: [] as unknown[] } : { sql: "system_key = ?", args: [systemKey] as unknown[] });

export const auditRepo = {
  /** Inserts the rows in order (their ids follow it). */
  async insertMany(ex: Executor, rows: AuditValues[]) {
    for (let i = 0; i < rows.length;) {
      const n = CHUNKS.find((c) => c <= rows.length - i)!;
      // (SQLite's VALUES yields its rows in order; on PostgreSQL the plain INSERT keeps that sure,
      // and binding there is not the cost it is on libSQL)
      const shared = n > 1 && ex.dialect.name === "sqlite" ? sharedIn(rows, i, n) : 0;
      const shape = shapeOf(shared);
      const args: unknown[] = [];
      for (const f of shape.once) args.push(rows[i]![f]);
      for (let j = i; j < i + n; j++) { const row = rows[j]!; for (const f of shape.each) args.push(row[f]); }
      await ex.run(insertSql(shape, n), args);
      i += n;
    }
  },
  /** The rows a parsed query selects, newest first unless it sorts otherwise. */
  list(ex: Executor, systemKey: string | null, q: Query) {
    const s = scope(systemKey);
    const { where, tail } = listClauses(ex.dialect, q, AUDIT_COLUMNS, "id DESC");
    return ex.all<AuditRow>(`SELECT * FROM audit WHERE ${s.sql} AND (${where.sql})${tail}`, [...s.args, ...where.args]);
  },
  async count(ex: Executor, systemKey: string | null, filters: Condition[][]) {
    const s = scope(systemKey);
    const where = compileWhere(filters, AUDIT_COLUMNS, ex.dialect);
    return Number((await ex.get<{ n: number }>(`SELECT count(*) AS n FROM audit WHERE ${s.sql} AND (${where.sql})`, [...s.args, ...where.args]))!.n);
  },
  async removeSystem(ex: Executor, systemKey: string) {
    await ex.run(`DELETE FROM audit WHERE system_key = ?`, [systemKey]);
  },
  /** Drops rows older than `before` (ISO time), and the oldest past the newest `maxRows`. */
  async trim(ex: Executor, before: string, maxRows: number) {
    await ex.run(`DELETE FROM audit WHERE time < ?`, [before]);
    const edge = await ex.get<{ id: number }>(`SELECT id FROM audit ORDER BY id DESC LIMIT 1 OFFSET ?`, [maxRows]);
    if (edge) await ex.run(`DELETE FROM audit WHERE id <= ?`, [edge.id]);
  },
};
