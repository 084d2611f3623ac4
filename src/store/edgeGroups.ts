// Edge groups: named sets of a system's edges and of other groups.
import type { ColumnMap, Query } from "../core/query.ts";
import type { Executor } from "./db.ts";
import { listClauses, upsert } from "./sql.ts";

/** `edges` and `edge_groups` are JSON arrays of names. */
export interface EdgeGroupRow { system_key: string; name: string; description: string; edges: string; edge_groups: string; created_at: string; updated_at: string }

/** What a query of edge groups may name. */
const COLUMNS: ColumnMap = {
  name: { sql: "name", type: "string" }, description: { sql: "description", type: "string" },
  created_at: { sql: "created_at", type: "string" }, updated_at: { sql: "updated_at", type: "string" },
};

export const edgeGroupsRepo = {
  get: (ex: Executor, systemKey: string, name: string) => ex.get<EdgeGroupRow>(`SELECT * FROM edge_groups WHERE system_key = ? AND name = ?`, [systemKey, name]),
  all: (ex: Executor, systemKey: string) => ex.all<EdgeGroupRow>(`SELECT * FROM edge_groups WHERE system_key = ? ORDER BY name`, [systemKey]),
  /** The groups a parsed query selects, ordered by its SORT then name. */
  list(ex: Executor, systemKey: string, q: Query) {
    const { where, tail } = listClauses(ex.dialect, q, COLUMNS, "name");
    return ex.all<EdgeGroupRow>(`SELECT * FROM edge_groups WHERE system_key = ? AND (${where.sql})${tail}`, [systemKey, ...where.args]);
  },
  put: (ex: Executor, r: EdgeGroupRow) => upsert(ex, "edge_groups", r as unknown as Record<string, unknown>, ["system_key", "name"]),
  delete: (ex: Executor, systemKey: string, name: string) => ex.run(`DELETE FROM edge_groups WHERE system_key = ? AND name = ?`, [systemKey, name]),
};
