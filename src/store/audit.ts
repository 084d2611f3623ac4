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
const TUPLE = `(${FIELDS.map(() => "?").join(",")})`;
const INSERTS = new Map(CHUNKS.map((n) => [n, `INSERT INTO audit(${FIELDS.join(", ")}) VALUES ${Array.from({ length: n }, () => TUPLE).join(",")}`]));

/** `systemKey` null: every system's rows (a platform admin's view). */
const scope = (systemKey: string | null) => (systemKey === null ? { sql: "1 = 1", args: [] as unknown[] } : { sql: "system_key = ?", args: [systemKey] as unknown[] });

export const auditRepo = {
  /** Inserts the rows in order (their ids follow it). */
  async insertMany(ex: Executor, rows: AuditValues[]) {
    for (let i = 0; i < rows.length;) {
      const n = CHUNKS.find((c) => c <= rows.length - i)!;
      const args: unknown[] = [];
      for (let j = i; j < i + n; j++) for (const v of rows[j]!) args.push(v);
      await ex.run(INSERTS.get(n)!, args);
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
