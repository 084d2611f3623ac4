// Sessions: the issued tokens of a system's users and devices, read and revoked as ClearBlade's
// session routes name them (user_id or device_key, issued).
import type { ColumnMap, Condition, Query } from "../core/query.ts";
import { compileWhere } from "../core/query.ts";
import type { Executor } from "./db.ts";
import { inParts, listClauses, marks } from "./sql.ts";

export type SessionKind = "user" | "device";
export interface SessionRow { token_hash: string; subject_id: string; created_at: number }

/** The fields a session query may filter and sort on. A device's key is "<system key> :: <name>",
 *  compared as such. */
const COLUMNS: Record<SessionKind, ColumnMap> = {
  user: { user_id: { sql: "subject_id", type: "string" }, issued: { sql: "created_at", type: "bigint" } },
  device: {
    device_key: { sql: "(system_key || ' :: ' || subject_id)", type: "string" }, device_name: { sql: "subject_id", type: "string" },
    issued: { sql: "created_at", type: "bigint" },
  },
};

/** A session's rows: live tokens of that kind in the system (expired ones are sessions no more). */
const WHERE = `kind = ? AND system_key = ? AND (expires_at = 0 OR expires_at > ?)`;

export const sessionsRepo = {
  list(ex: Executor, kind: SessionKind, systemKey: string, now: number, q: Query) {
    const { where, tail } = listClauses(ex.dialect, q, COLUMNS[kind], "created_at, token_hash");
    return ex.all<SessionRow>(`SELECT token_hash, subject_id, created_at FROM tokens WHERE ${WHERE} AND (${where.sql})${tail}`, [kind, systemKey, now, ...where.args]);
  },
  async count(ex: Executor, kind: SessionKind, systemKey: string, now: number, filters: Condition[][]) {
    const where = compileWhere(filters, COLUMNS[kind], ex.dialect);
    return Number((await ex.get<{ n: number }>(`SELECT count(*) AS n FROM tokens WHERE ${WHERE} AND (${where.sql})`, [kind, systemKey, now, ...where.args]))!.n);
  },
  /** Deletes the sessions `filters` match; the hashes of their tokens. */
  async delete(ex: Executor, kind: SessionKind, systemKey: string, now: number, filters: Condition[][]): Promise<string[]> {
    const where = compileWhere(filters, COLUMNS[kind], ex.dialect);
    const args = [kind, systemKey, now, ...where.args];
    const rows = await ex.all<{ token_hash: string }>(`SELECT token_hash FROM tokens WHERE ${WHERE} AND (${where.sql})`, args);
    if (!rows.length) return [];
    const hashes = rows.map((r) => r.token_hash);
    for (const part of inParts(hashes)) await ex.run(`DELETE FROM tokens WHERE token_hash IN (${marks(part.length)})`, part);
    return hashes;
  },
};
