// Edge groups: named sets of a system's edges and of other groups.
import type { CompiledWhere } from "../core/query.ts";
import type { Executor } from "./db.ts";
import { upsert } from "./sql.ts";

/** `edges` and `edge_groups` are JSON arrays of names. */
export interface EdgeGroupRow { system_key: string; name: string; description: string; edges: string; edge_groups: string; created_at: string; updated_at: string }

export const edgeGroupsRepo = {
  get: (ex: Executor, systemKey: string, name: string) => ex.get<EdgeGroupRow>(`SELECT * FROM edge_groups WHERE system_key = ? AND name = ?`, [systemKey, name]),
  all: (ex: Executor, systemKey: string) => ex.all<EdgeGroupRow>(`SELECT * FROM edge_groups WHERE system_key = ? ORDER BY name`, [systemKey]),
  list: (ex: Executor, systemKey: string, where: CompiledWhere, orderAndLimit: string) =>
    ex.all<EdgeGroupRow>(`SELECT * FROM edge_groups WHERE system_key = ? AND (${where.sql})${orderAndLimit}`, [systemKey, ...where.args]),
  put: (ex: Executor, r: EdgeGroupRow) => upsert(ex, "edge_groups", r as unknown as Record<string, unknown>, ["system_key", "name"]),
  delete: (ex: Executor, systemKey: string, name: string) => ex.run(`DELETE FROM edge_groups WHERE system_key = ? AND name = ?`, [systemKey, name]),
};
